"""Hibernation: an idle user's schema packed into one row, and restored on the next call.

Design note. A Durable Object that is not running costs nothing; a schema costs catalog rows,
disk and relcache whether or not anyone calls it (issue 16). So a user idle for N days (the
registry's ``active_on``, stamped at most once a day per process by ``ensure_schema``) is
*hibernated*: every table of their schema is read with ``COPY … TO STDOUT``, packed as
zlib-compressed JSON into ``kody_schema_archives``, the schema is dropped and the registry row
is marked ``hibernated_at`` — all in ONE transaction. Restoring is the reverse, also in one
transaction: create the schema from the current DDL (its table sets only), ``COPY … FROM
STDIN`` every table, advance identity sequences, run the data steps between the archived
version and the current one (the fleet upgrade, on restore), delete the archive row and clear
the mark. So after any crash exactly one of schema and archive is authoritative: a transaction
that did not commit left the other one untouched.

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

import json
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from kody.userschema import tablesets
from kody.userschema.actor_models import schema_version
from kody.userschema.ddl import compile_schema
from kody.userschema.models import SchemaArchive, UserSchema
from kody.userschema.naming import quoted
from kody.userschema.scope import user_schema_scope
from kody.userschema.upgrades import steps_between

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
    cursor.execute(
        "SELECT c.relname, array_agg(a.attname ORDER BY a.attnum) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " WHERE n.nspname = %s AND c.relkind = 'r' GROUP BY c.relname ORDER BY c.relname",
        [schema],
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
    """Bring a hibernated user's schema back at the current version; returns its name. A
    no-op (the name) when it is awake. One transaction."""
    connection = connections[using]
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT schema_name, hibernated_at FROM {REGISTRY} WHERE user_id = %s FOR UPDATE",
            [user_id],
        )
        row = cursor.fetchone()
        if row is None or row[1] is None:
            return row[0] if row else ""
        schema = row[0]
        cursor.execute(
            f"SELECT version, table_sets, data FROM {ARCHIVES} WHERE user_id = %s FOR UPDATE",
            [user_id],
        )
        archived = cursor.fetchone()
        if archived is None:
            raise RuntimeError(f"{schema} is marked hibernated but has no archive")
        document = json.loads(zlib.decompress(bytes(archived[2])))
        ddl = tablesets.subset(
            compile_schema(None, using), tablesets.tables_of(document["table_sets"])
        )
        target = schema_version()
        with user_schema_scope(schema, using):
            cursor.execute(f"CREATE SCHEMA {quoted(schema)};\n{ddl.create_script}")
            for table, content in sorted(document["tables"].items()):
                _copy_in(using, schema, table, content["columns"], content["copy"])
                _after_load(user_id, table)
            for table, columns in _identity_columns(cursor, schema):
                for column in columns:
                    cursor.execute(
                        f"SELECT setval(pg_get_serial_sequence(%s, %s),"
                        f' coalesce((SELECT max("{column}") FROM "{table}"), 0) + 1, false)',
                        [f'{quoted(schema)}."{table}"', column],
                    )
            for step in steps_between(document["version"], target):
                step.run(cursor)
        cursor.execute(f"DELETE FROM {ARCHIVES} WHERE user_id = %s", [user_id])
        cursor.execute(
            f"UPDATE {REGISTRY} SET hibernated_at = NULL, version = %s, upgraded_at = now(),"
            " active_on = %s WHERE user_id = %s",
            [target, timezone.now().date(), user_id],
        )
    return schema


def _copy_in(using: str, schema: str, table: str, columns: list[str], text: str) -> None:
    if not text:
        return
    raw = connections[using].connection
    names = ", ".join(f'"{c}"' for c in columns)
    with raw.cursor() as cursor:
        with cursor.copy(f'COPY {quoted(schema)}."{table}" ({names}) FROM STDIN') as copy:
            copy.write(text.encode())


def _identity_columns(cursor: CursorWrapper, schema: str) -> Iterator[tuple[str, list[str]]]:
    cursor.execute(
        "SELECT c.relname, array_agg(a.attname) FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped"
        " AND (a.attidentity <> '' OR pg_get_serial_sequence("
        "   quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname) IS NOT NULL)"
        " GROUP BY c.relname",
        [schema],
    )
    yield from ((table, list(columns)) for table, columns in cursor.fetchall())
