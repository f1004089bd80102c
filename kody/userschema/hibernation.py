"""Hibernation: an idle user's schema packed into one row, and restored on the next call.

Design note. A Durable Object that is not running costs nothing; a schema costs catalog rows,
disk and relcache whether or not anyone calls it (issue 16). So a user idle for N days (the
registry's ``active_on``, stamped at most once a day per process by ``ensure_schema``) is
*hibernated*: every table of their schema is read with ``COPY … TO STDOUT``, packed as
zlib-compressed JSON into ``kody_schema_archives``, the schema is dropped and the registry row
is marked ``hibernated_at`` — all in ONE transaction. Restoring is the reverse, also in one
transaction, in three round trips plus one COPY per non-empty table: the registry and archive
rows together; ``search_path`` and a spare schema renamed to the user's
(``kody.userschema.spares``), else the schema and its bare tables from the current DDL (its
table sets that held rows only, compiled once per process); ``COPY … FROM STDIN`` of each
table; then the indexes and constraints (built after the load), identity sequences, the archive
row's deletion and the cleared mark in one pipeline; then the data steps between the archived
version and the current one (the fleet upgrade, on restore). Nothing asks the catalog which
tables or sequences exist: at fleet scale (a million pg_class rows) a scan by namespace would
dominate the restore. So after any crash exactly one of schema and archive is authoritative: a
transaction that did not commit left the other one untouched (and a spare it took is a spare
again).

Locks. Hibernation takes ``actor_owner`` in ACCESS EXCLUSIVE mode first: it waits for a running
call to finish, and every call that arrives meanwhile queues behind it (calls lock the owner
row, which needs the table). When it commits the queued calls find no table, fail their first
statement with "relation does not exist", and the runtime's existing retry path
(``known.forget`` → ``ensure_schema``) restores the schema and runs them — a call never sees a
half-dropped or half-restored schema. Restores serialize on the registry row (``FOR UPDATE``),
and the second one finds nothing to do. Nobody else holds the owner row of a schema that does
not exist, so restore's registry-row-first order cannot deadlock with calls.

Who restores: ``ensure_schema`` (every call, alarm and export goes through it). Deletion
restores too (its hooks are calls), and ``purge_schema`` deletes the archive with the schema.
"""

from __future__ import annotations

import functools
import json
import logging
import zlib
from dataclasses import dataclass
from datetime import date

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models.fields import AutoFieldMixin
from django.utils import timezone

from kody.userschema import spares, tablesets
from kody.userschema.actor_models import actor_models, schema_version
from kody.userschema.ddl import compile_schema
from kody.userschema.models import SchemaArchive, UserSchema
from kody.userschema.naming import quoted
from kody.userschema.scope import in_one_query, user_schema_scope
from kody.userschema.upgrades import is_retired, steps_between

log = logging.getLogger("kody.userschema")

REGISTRY = UserSchema._meta.db_table
ARCHIVES = SchemaArchive._meta.db_table
OWNER_TABLE = "actor_owner"
FORMAT = 1


@dataclass(frozen=True)
class Packed:
    user_id: str
    schema: str
    tables: int
    rows: int
    bytes: int


def idle_users(idle_before: date, *, after: str = "", limit: int = 500) -> list[str]:
    """Users with a live, awake schema not active since before ``idle_before`` (keyset)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            f"SELECT user_id FROM {REGISTRY} WHERE hibernated_at IS NULL AND deleting_at IS NULL"
            " AND version > 0 AND coalesce(active_on, created_at::date) < %s AND user_id > %s"
            " ORDER BY user_id LIMIT %s",
            [idle_before, after, limit],
        )
        return [row[0] for row in cursor.fetchall()]


def _tables(cursor: CursorWrapper, schema: str) -> list[tuple[str, list[str]]]:
    """The schema's actor tables and their columns. Asks by name (every actor table the
    models know), so the lookup uses pg_class's (relname, relnamespace) index: a scan by
    namespace alone would read the whole catalog of a fleet."""
    names = [model._meta.db_table for model in actor_models()]
    cursor.execute(
        "SELECT c.relname, array_agg(a.attname ORDER BY a.attnum) FROM pg_class c"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " WHERE c.relname = ANY(%s) AND c.relnamespace = to_regnamespace(%s) AND c.relkind = 'r'"
        " GROUP BY c.relname ORDER BY c.relname",
        [names, schema],
    )
    return [(name, list(columns)) for name, columns in cursor.fetchall()]


def _copy_out(using: str, schema: str, table: str, columns: list[str]) -> tuple[str, int]:
    raw = connections[using].connection
    names = ", ".join(f'"{c}"' for c in columns)
    chunks: list[bytes] = []
    with raw.cursor() as cursor:
        with cursor.copy(f'COPY {quoted(schema)}."{table}" ({names}) TO STDOUT') as copy:
            for block in copy:
                chunks.append(bytes(block))
    text = b"".join(chunks).decode()
    return text, text.count("\n")


def _before_drop(user_id: str) -> None:
    """A seam for fault-injection tests: runs after the archive is written, before the DROP."""


def _after_load(user_id: str, table: str) -> None:
    """A seam for fault-injection tests: runs after each table is loaded on restore."""


def hibernate_schema(
    user_id: str, idle_before: date | None = None, *, using: str = DEFAULT_DB_ALIAS
) -> Packed | None:
    """Pack and drop the user's schema (None if it is not there to hibernate, or if the user
    became active since ``idle_before``). One transaction; safe to run again."""
    connection = connections[using]
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT schema_name FROM {REGISTRY} WHERE user_id = %s AND hibernated_at IS NULL"
            " AND deleting_at IS NULL AND version > 0",
            [user_id],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        schema = row[0]
        # Waits for a running call; calls arriving meanwhile queue behind this lock.
        lock = (f"LOCK TABLE {OWNER_TABLE} IN ACCESS EXCLUSIVE MODE", ())
        with user_schema_scope(schema, using, then=[lock]):
            pass
        cursor.execute(
            f"SELECT version, table_sets, coalesce(active_on, created_at::date) FROM {REGISTRY}"
            " WHERE user_id = %s AND hibernated_at IS NULL AND deleting_at IS NULL"
            " AND version > 0 FOR UPDATE",
            [user_id],
        )
        row = cursor.fetchone()
        if row is None or (idle_before is not None and row[2] >= idle_before):
            return None  # hibernated, deleted or active while we waited
        version, created = row[0], row[1]
        tables, total = {}, 0
        for table, columns in _tables(cursor, schema):
            text, count = _copy_out(using, schema, table, columns)
            tables[table] = {"columns": columns, "rows": count, "copy": text}
            total += count
        document = {"format": FORMAT, "version": version, "table_sets": created, "tables": tables}
        data = zlib.compress(json.dumps(document).encode(), 6)
        cursor.execute(
            f"INSERT INTO {ARCHIVES} (user_id, version, table_sets, data, rows, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            [user_id, version, created, data, total, timezone.now()],
        )
        _before_drop(user_id)
        cursor.execute(f"DROP SCHEMA {quoted(schema)} CASCADE")
        cursor.execute(
            f"UPDATE {REGISTRY} SET hibernated_at = %s WHERE user_id = %s",
            [timezone.now(), user_id],
        )
    _forget(user_id)
    return Packed(user_id, schema, len(tables), total, len(data))


def _forget(user_id: str) -> None:
    from kody.userschema.schemas import known  # schemas imports this module

    known.forget(user_id)


def restore_schema(user_id: str, using: str = DEFAULT_DB_ALIAS) -> str:
    """Bring a hibernated user's schema back at the current version; returns its name."""
    return restore(user_id, using)[0]


def restore(user_id: str, using: str = DEFAULT_DB_ALIAS) -> tuple[str, list[str] | None]:
    """Bring a hibernated user's schema back at the current version; returns its name and
    the registry's ``table_sets`` after. A no-op when it is awake. One transaction, in few
    round trips (issue 16: restore p99 <= 100 ms): the registry and archive rows together;
    the schema and its bare tables in one pipeline; one COPY per table that has rows; then
    indexes, foreign keys, identity sequences, the archive's deletion and the registry update
    in one more pipeline. No catalog scan: which tables, columns and sequences there are
    comes from the compiled DDL.

    A table set whose tables were all empty is not rebuilt: creating a set's tables and
    indexes is most of a restore's cost (a Mailbox set alone doubles it), and an empty set
    is exactly what the actor's first call creates anyway (``ensure_schema``). So the
    registry forgets it and the set comes back on first use, not on every wake."""
    connection = connections[using]
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.schema_name, a.version, a.table_sets, a.data FROM {REGISTRY} r"
            f" JOIN {ARCHIVES} a ON a.user_id = r.user_id"
            " WHERE r.user_id = %s AND r.hibernated_at IS NOT NULL FOR UPDATE",
            [user_id],
        )
        row = cursor.fetchone()
        if row is None:
            return _awake_or_broken(cursor, user_id)
        schema, version, created, data = row
        document = json.loads(zlib.decompress(bytes(data)))
        target = schema_version()
        kept = _sets_holding_rows(document, target)
        plan = _restore_plan(target, kept)
        # search_path and a spare schema renamed to this user's (kody.userschema.spares):
        # one round trip; then the tables the spare lacks, or all of them without a spare.
        take = [(spares.take_statement(schema), ()), (_EXISTS, [schema])]
        with user_schema_scope(schema, using, then=take) as results:
            spare = bool(results[1][0][0])
            if spare:
                extras = plan.spare_extras
                if plan.spare_tables:
                    in_one_query(connection, list(plan.spare_tables), rows=False)
            else:
                extras = plan.extras
                in_one_query(
                    connection,
                    [(f"CREATE SCHEMA {quoted(schema)}", ()), *plan.tables],
                    rows=False,
                )
            loaded = []
            for table, content in sorted(document["tables"].items()):
                if is_retired(table, document["version"]):
                    continue  # dropped by a later version: no model, no table, no reader
                if content["copy"]:
                    _copy_in(using, schema, table, content["columns"], content["copy"])
                    loaded.append(table)
                _after_load(user_id, table)
            today = timezone.now().date()
            in_one_query(
                connection,
                [
                    *extras,
                    *_sequence_statements(schema, loaded),
                    (f"DELETE FROM {ARCHIVES} WHERE user_id = %s", [user_id]),
                    (
                        f"UPDATE {REGISTRY} SET hibernated_at = NULL, version = %s,"
                        " upgraded_at = now(), active_on = %s, table_sets = %s"
                        " WHERE user_id = %s",
                        [target, today, _listed(kept), user_id],
                    ),
                ],
                rows=False,
            )
            # Data steps between the archived version and now (the fleet upgrade, on restore).
            for step in steps_between(document["version"], target):
                step.run(cursor)
    return schema, _listed(kept)


def _frozen(table_sets: list[str] | None) -> frozenset[str] | None:
    return None if table_sets is None else frozenset(table_sets)


def _listed(table_sets: frozenset[str] | None) -> list[str] | None:
    return None if table_sets is None else sorted(table_sets)


def _sets_holding_rows(document: dict, target: int) -> frozenset[str] | None:
    """The archived table sets to rebuild: those with a row in any of their tables. All of
    them (as archived) when the schema holds every set (``None``) or data steps will run
    between the versions — a step may expect its tables whether or not they hold rows."""
    archived = _frozen(document["table_sets"])
    if archived is None or not tablesets.enabled() or steps_between(document["version"], target):
        return archived
    holding = {table for table, content in document["tables"].items() if content["copy"]}
    declared = tablesets.sets()
    return frozenset(name for name in archived if name not in declared or declared[name] & holding)


def _awake_or_broken(cursor: CursorWrapper, user_id: str) -> tuple[str, list[str] | None]:
    cursor.execute(
        f"SELECT schema_name, hibernated_at, table_sets FROM {REGISTRY}"
        " WHERE user_id = %s FOR UPDATE",
        [user_id],
    )
    row = cursor.fetchone()
    if row is None:
        return "", None
    if row[1] is not None:
        raise RuntimeError(f"{row[0]} is marked hibernated but has no archive")
    return row[0], row[2]


_EXISTS = "SELECT to_regnamespace(%s) IS NOT NULL"


@dataclass(frozen=True)
class RestorePlan:
    tables: tuple[tuple[str, tuple], ...]  # CREATE TABLE, bare (primary keys inline)
    extras: tuple[tuple[str, tuple], ...]  # indexes and foreign keys, after the load
    identity: dict[str, tuple[str, ...]]  # table -> its identity columns
    # The same for the tables a spare schema lacks (the sets beyond the eager tables).
    spare_tables: tuple[tuple[str, tuple], ...] = ()
    spare_extras: tuple[tuple[str, tuple], ...] = ()


@functools.cache
def _restore_plan(version: int, table_sets: frozenset[str] | None) -> RestorePlan:
    """The statements that rebuild a schema holding ``table_sets``, compiled once per
    (version, sets) per process."""
    ddl = tablesets.subset(compile_schema(version), tablesets.tables_of(table_sets))
    identity = {}
    for model in actor_models():
        if model._meta.db_table in {t.table for t in ddl.tables}:
            columns = tuple(
                f.column for f in model._meta.local_concrete_fields if isinstance(f, AutoFieldMixin)
            )
            if columns:
                identity[model._meta.db_table] = columns
    in_spare = tablesets.tables_of([])  # what kody.userschema.spares builds
    assert in_spare is not None  # no table sets named: the eager tables, never "all"
    beyond = [t for t in ddl.tables if t.table not in in_spare]
    return RestorePlan(
        tables=tuple((t.create_table, ()) for t in ddl.tables),
        extras=tuple((sql, ()) for t in ddl.tables for sql in t.create_extras),
        identity=identity,
        spare_tables=tuple((t.create_table, ()) for t in beyond),
        spare_extras=tuple((sql, ()) for t in beyond for sql in t.create_extras),
    )


def _sequence_statements(schema: str, loaded: list[str]) -> list[tuple[str, list]]:
    """Identity sequences continue after the restored rows (empty tables start afresh)."""
    identity = _restore_plan(schema_version(), None).identity
    parts, params = [], []
    for table in loaded:
        for column in identity.get(table, ()):
            parts.append(
                f'setval(pg_get_serial_sequence(%s, %s), coalesce((SELECT max("{column}")'
                f' FROM {quoted(schema)}."{table}"), 0) + 1, false)'
            )
            params += [f'{quoted(schema)}."{table}"', column]
    return [(f"SELECT {', '.join(parts)}", params)] if parts else []


def _copy_in(using: str, schema: str, table: str, columns: list[str], text: str) -> None:
    if not text:
        return
    raw = connections[using].connection
    names = ", ".join(f'"{c}"' for c in columns)
    with raw.cursor() as cursor:
        with cursor.copy(f'COPY {quoted(schema)}."{table}" ({names}) FROM STDIN') as copy:
            copy.write(text.encode())
