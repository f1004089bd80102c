"""Create, upgrade, look up and purge per-user schemas.

Creation is the Durable Object cold start: one transaction that claims the registry row,
creates the schema and runs the compiled DDL, then writes the owner row. Only a live account
gets one (``kody.userschema.accounts``): an id with no account, or one being deleted, never
gets a schema, whatever call reaches it. Deletion goes ``mark_deleting`` (tombstone; waits
for running calls) → ``purge_schema`` (drops the schema, keeps the tombstone) →
``finish_deletion`` (clears the tombstone, so the same stable id can sign up again).

Upgrades compare a schema with the models by name and add what is missing, so they are
additive and can run again after a crash. Lock order everywhere: the schema's owner row (or
its tables), then the user's registry row — the order an actor call takes them in
(``set_alarm`` updates the registry row while the call holds its owner row), so upgrades,
purges, ``mark_deleting`` and calls never deadlock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.utils import CursorWrapper

from kody.errors import AccountDeleting
from kody.userschema import hibernation, tablesets
from kody.userschema.accounts import AccountState, NoLiveAccount, account_state
from kody.userschema.actor_models import schema_version
from kody.userschema.ddl import SchemaDDL, compile_schema
from kody.userschema.models import UserSchema
from kody.userschema.naming import quoted, schema_name_for
from kody.userschema.schema_cache import (  # noqa: F401  (known: callers read it from here)
    _KnownSchemas,
    _remember_after_commit,
    _stamp_active,
    _today,
    known,
)
from kody.userschema.scope import user_schema_scope
from kody.userschema.upgrades import steps_between

REGISTRY = UserSchema._meta.db_table
OWNER_TABLE = "actor_owner"


class SchemaNameCollision(Exception):
    """Two stable ids map to one schema name; the registry refused the second."""


class SchemaMissing(LookupError):
    pass


@dataclass
class Introspection:
    columns: dict[str, set[str]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class UpgradePlan:
    user_id: str
    schema: str
    from_version: int
    to_version: int
    statements: tuple[str, ...]
    steps: tuple[str, ...]

    @property
    def needed(self) -> bool:
        return self.from_version < self.to_version


def create_schema(
    user_id: str,
    *,
    version: int | None = None,
    ddl: SchemaDDL | None = None,
    table_sets: Iterable[str] | None = (),
    using: str = DEFAULT_DB_ALIAS,
) -> str:
    """Create the user's schema at ``version`` (default: current); a no-op if it exists.

    It holds the eager tables plus the sets of the actors in ``table_sets``
    (``kody.userschema.tablesets``); ``None`` (or lazy tables switched off) creates every
    table. ``ddl`` replaces the compiled actor models (benchmarks time larger table sets)."""
    if ddl is None:
        ddl = compile_schema(version, using)
        if tablesets.enabled() and table_sets is not None:
            table_sets = sorted(tablesets.needed(table_sets))
            ddl = tablesets.subset(ddl, tablesets.tables_of(table_sets))
        else:
            table_sets = None
    else:
        table_sets = None
    schema = schema_name_for(user_id)
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        _refuse_unless_live(user_id, using)
        cursor.execute(
            f"INSERT INTO {REGISTRY} (user_id, schema_name, version, created_at, upgraded_at,"
            " table_sets) VALUES (%s, %s, %s, now(), now(), %s)"
            " ON CONFLICT DO NOTHING RETURNING schema_name",
            [user_id, schema, ddl.version, table_sets],
        )
        if cursor.fetchone() is None:
            return _existing_or_collision(cursor, user_id, schema)
        orphan = _schema_exists(cursor, schema)
        if orphan:
            _adopt_orphan(cursor, user_id, schema)
        else:
            with user_schema_scope(schema, using):
                # search_path may name a schema before it exists; the CREATE makes it live.
                cursor.execute(f"CREATE SCHEMA {quoted(schema)};\n{ddl.create_script}")
                cursor.execute(
                    f"INSERT INTO {OWNER_TABLE} (id, owner_id, created_at) VALUES (1, %s, now())",
                    [user_id],
                )
    if orphan:
        return upgrade_schema(user_id, using=using).schema
    if ddl.version == schema_version():
        _remember_after_commit(user_id, schema, using, table_sets)
    return schema


def _refuse_unless_live(user_id: str, using: str) -> None:
    state = account_state(user_id, using)
    if state is AccountState.DELETING:
        raise AccountDeleting()
    if state is not AccountState.LIVE:
        raise NoLiveAccount(details={"user_id": user_id})


def _schema_exists(cursor: CursorWrapper, schema: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
    return cursor.fetchone() is not None


def _adopt_orphan(cursor: CursorWrapper, user_id: str, schema: str) -> None:
    """Re-register a schema that outlived its registry row (a partial restore, a flushed test
    database). It is recorded at version 1 so the additive, idempotent upgrade path brings it
    to the current version; its owner row must name this user, or it is someone else's."""
    cursor.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s",
        [schema, OWNER_TABLE],
    )
    owner = None
    if cursor.fetchone() is not None:
        cursor.execute(f"SELECT owner_id FROM {quoted(schema)}.{OWNER_TABLE} WHERE id = 1")
        row = cursor.fetchone()
        owner = row[0] if row else None
    if owner != user_id:
        raise SchemaNameCollision(f"schema {schema} exists but is not owned by this user")
    # Which tables it holds is not known: NULL (all), so the upgrade completes every set.
    cursor.execute(
        f"UPDATE {REGISTRY} SET version = 1, table_sets = NULL WHERE user_id = %s", [user_id]
    )


def _existing_or_collision(cursor: CursorWrapper, user_id: str, schema: str) -> str:
    cursor.execute(f"SELECT schema_name, deleting_at FROM {REGISTRY} WHERE user_id = %s", [user_id])
    row = cursor.fetchone()
    if row is None:
        raise SchemaNameCollision(f"schema {schema} already belongs to another user")
    if row[1] is not None:
        raise AccountDeleting()  # the tombstone of an earlier account with this id
    return row[0]


def introspect(cursor: CursorWrapper, schema: str, ddl: SchemaDDL | None = None) -> Introspection:
    """Which of the DDL's tables, columns, indexes and constraints exist in ``schema``.

    Asks by name, so every lookup uses a catalog index: with thousands of user schemas a scan
    of pg_class by namespace alone would dominate the fleet upgrade."""
    ddl = ddl or compile_schema()
    tables = [table.table for table in ddl.tables]
    names = [name for table in ddl.tables for name in table.named]
    cursor.execute(
        """
        WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %s),
             rel AS (SELECT c.oid, c.relname FROM pg_class c, ns
                      WHERE c.relnamespace = ns.oid AND c.relname = ANY(%s))
        SELECT 'c', rel.relname, a.attname FROM rel JOIN pg_attribute a ON a.attrelid = rel.oid
         WHERE a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT 'n', c.relname, NULL FROM pg_class c, ns
         WHERE c.relnamespace = ns.oid AND c.relname = ANY(%s)
        UNION ALL
        SELECT 'n', con.conname, NULL FROM pg_constraint con JOIN rel ON con.conrelid = rel.oid
        """,
        [schema, tables, names],
    )
    found = Introspection()
    for kind, name, column in cursor.fetchall():
        if kind == "c":
            found.columns.setdefault(name, set()).add(column)
        else:
            found.names.add(name)
    return found


def missing_statements(found: Introspection, ddl: SchemaDDL) -> list[str]:
    creates: list[str] = []
    extras: list[str] = []
    later: list[str] = []
    for table in ddl.tables:
        columns = found.columns.get(table.table)
        if columns is None:
            creates.append(table.create_table)
            extras.extend(table.create_extras)
            continue
        for column, statements in table.columns.items():
            if column not in columns:
                later.extend(statements)
        later.extend(sql for name, sql in table.named.items() if name not in found.names)
    return [*creates, *extras, *later]


def _registry_row(cursor: CursorWrapper, user_id: str, *, lock: bool = False) -> tuple[str, int]:
    schema, version, _ = _registry_sets(cursor, user_id, lock=lock)
    return schema, version


def _registry_sets(
    cursor: CursorWrapper, user_id: str, *, lock: bool = False
) -> tuple[str, int, list[str] | None]:
    cursor.execute(
        f"SELECT schema_name, version, table_sets FROM {REGISTRY} WHERE user_id = %s"
        + (" FOR UPDATE" if lock else ""),
        [user_id],
    )
    row = cursor.fetchone()
    if row is None:
        raise SchemaMissing(user_id)
    return row[0], row[1], row[2]


def upgrade_schema(
    user_id: str, *, dry_run: bool = False, using: str = DEFAULT_DB_ALIAS
) -> UpgradePlan:
    """Bring one schema to the current version; returns what was (or would be) done."""
    target = schema_version()
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        schema, version = _registry_row(cursor, user_id)
        if version >= target or version == PURGED or _hibernated(cursor, user_id):
            # A hibernated schema is upgraded when it is restored.
            return UpgradePlan(user_id, schema, version, version, (), ())
        owner_lock = (f"SELECT 1 FROM {OWNER_TABLE} WHERE id = 1 FOR UPDATE", ())
        with user_schema_scope(schema, using, then=[owner_lock]):
            schema, version, created = _registry_sets(cursor, user_id, lock=True)
            if version >= target or version == PURGED:  # changed while we waited
                return UpgradePlan(user_id, schema, version, version, (), ())
            # Only the tables this schema holds: a set not created yet stays absent.
            ddl = tablesets.subset(compile_schema(None, using), tablesets.tables_of(created))
            statements = missing_statements(introspect(cursor, schema, ddl), ddl)
            steps = steps_between(version, target)
            plan = UpgradePlan(
                user_id, schema, version, target, tuple(statements), tuple(s.name for s in steps)
            )
            if dry_run:
                transaction.set_rollback(True, using=using)
                return plan
            if statements:
                cursor.execute("\n".join(statements))
            for step in steps:
                step.run(cursor)
        cursor.execute(
            f"UPDATE {REGISTRY} SET version = %s, upgraded_at = now() WHERE user_id = %s",
            [target, user_id],
        )
    _remember_after_commit(user_id, schema, using, created)
    return plan


def _hibernated(cursor: CursorWrapper, user_id: str) -> bool:
    cursor.execute(f"SELECT hibernated_at FROM {REGISTRY} WHERE user_id = %s", [user_id])
    row = cursor.fetchone()
    return row is not None and row[0] is not None


def ensure_schema(
    user_id: str,
    using: str = DEFAULT_DB_ALIAS,
    *,
    create: bool = True,
    actors: Iterable[str] = (),
) -> str:
    """The user's schema, upgraded on first access and cached per process, holding the table
    sets of ``actors`` (created on their first call); created if missing and ``create``
    (only for a live account, see ``create_schema``). Raises ``NoLiveAccount`` when there is
    none and none may be made, ``AccountDeleting`` after a purge."""
    entry = known.entry(user_id)
    if entry is not None and entry[2] == _today():
        if entry[1] is None or entry[1].issuperset(actors):
            return entry[0]  # the hot path: every call after the first in this process
        if entry[1] >= tablesets.needed(actors):
            return entry[0]
    wanted = tablesets.needed(actors)
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT schema_name, version, deleting_at, table_sets, hibernated_at FROM {REGISTRY}"
            " WHERE user_id = %s",
            [user_id],
        )
        row = cursor.fetchone()
    if row is None:
        if not create:
            raise NoLiveAccount(details={"user_id": user_id})
        schema = create_schema(user_id, table_sets=wanted, using=using)
        _remember_after_commit(user_id, schema, using, wanted, _stamp_active(user_id, using))
        return schema
    schema, version, _, created, hibernated = row
    if version == PURGED:
        raise AccountDeleting()
    stamped = -1
    if hibernated is not None:
        # At the current version, with only the table sets that held rows.
        schema, created = hibernation.restore(user_id, using)
        if not connections[using].in_atomic_block:
            stamped = _today()  # the restore committed today's active_on
    elif version < schema_version():
        schema = upgrade_schema(user_id, using=using).schema
    if created is not None and not wanted <= set(created):
        created = create_table_sets(user_id, wanted, using=using)
    if stamped < 0:
        stamped = _stamp_active(user_id, using)
    _remember_after_commit(user_id, schema, using, created, stamped)
    return schema


def create_table_sets(
    user_id: str, actors: Iterable[str], using: str = DEFAULT_DB_ALIAS
) -> list[str] | None:
    """Create the tables of ``actors`` in the user's (current-version) schema, in one
    transaction under the owner-row lock; returns the registry's ``table_sets`` after."""
    wanted = tablesets.needed(actors)
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        schema, _ = _registry_row(cursor, user_id)
        owner_lock = (f"SELECT 1 FROM {OWNER_TABLE} WHERE id = 1 FOR UPDATE", ())
        with user_schema_scope(schema, using, then=[owner_lock]):
            schema, version, created = _registry_sets(cursor, user_id, lock=True)
            if created is None or wanted <= set(created) or version == PURGED:
                return created
            after = sorted(set(created) | wanted)
            ddl = tablesets.subset(compile_schema(None, using), tablesets.tables_of(after))
            statements = missing_statements(introspect(cursor, schema, ddl), ddl)
            if statements:
                cursor.execute("\n".join(statements))
        cursor.execute(
            f"UPDATE {REGISTRY} SET table_sets = %s WHERE user_id = %s", [after, user_id]
        )
    return after


def has_actor_state(user_id: str, actor: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether ``actor`` has tables for this user yet. Export and deletion skip the hooks of
    an actor that never ran: calling them would create its tables only to read nothing. An
    actor without a set of its own uses the tables every schema has: always True."""
    if actor not in tablesets.sets():
        return True
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT table_sets, version FROM {REGISTRY} WHERE user_id = %s", [user_id])
        row = cursor.fetchone()
    if row is None or row[1] == PURGED:
        return False
    return tablesets.is_created(row[0], actor)


# The version of a tombstone whose schema is gone: nothing to upgrade, nothing to reach.
PURGED = 0


def mark_deleting(user_id: str, using: str = DEFAULT_DB_ALIAS) -> None:
    """Set the deletion tombstone. Waits for a running call of this user to finish (it takes
    the owner-row lock every call holds), so when it returns, no call that is not
    deletion-safe is running, and none will run until ``finish_deletion``. Idempotent; an
    id without a schema gets a tombstone row too, so nothing can create one meanwhile."""
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {REGISTRY} (user_id, schema_name, version, created_at, upgraded_at,"
            " deleting_at) VALUES (%s, %s, %s, now(), now(), now())"
            " ON CONFLICT (user_id) DO NOTHING RETURNING schema_name",
            [user_id, schema_name_for(user_id), PURGED],
        )
        if cursor.fetchone() is not None:
            return  # no schema existed; the tombstone row alone fences creation
        schema, version = _registry_row(cursor, user_id)
        if version != PURGED and _schema_exists(cursor, schema):
            owner_lock = (f"SELECT 1 FROM {OWNER_TABLE} WHERE id = 1 FOR UPDATE", ())
            with user_schema_scope(schema, using, then=[owner_lock]):
                pass  # held until COMMIT: running calls finish first, later ones see the mark
        cursor.execute(
            f"UPDATE {REGISTRY} SET deleting_at = COALESCE(deleting_at, now()), alarm_at = NULL"
            " WHERE user_id = %s",
            [user_id],
        )


def unmark_deleting(user_id: str, using: str = DEFAULT_DB_ALIAS) -> None:
    """Abandon a deletion: lift the tombstone (a purged user's registry row goes, so a new
    schema can be made for the account). Idempotent."""
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {REGISTRY} WHERE user_id = %s AND version = %s", [user_id, PURGED]
        )
        cursor.execute(f"UPDATE {REGISTRY} SET deleting_at = NULL WHERE user_id = %s", [user_id])
    known.forget(user_id)


def purge_schema(user_id: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Drop the user's schema; True if there was one. Idempotent. A tombstoned user keeps its
    registry row (version 0) until ``finish_deletion``; any other user's row goes."""
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT schema_name, version, deleting_at FROM {REGISTRY} WHERE user_id = %s",
            [user_id],
        )
        row = cursor.fetchone()
        # Drop first: it waits for in-flight calls, which may still touch the registry row.
        cursor.execute(
            f"DROP SCHEMA IF EXISTS {quoted(row[0] if row else schema_name_for(user_id))} CASCADE"
        )
        # A hibernated schema lives in its archive: that goes too.
        cursor.execute(f"DELETE FROM {hibernation.ARCHIVES} WHERE user_id = %s", [user_id])
        if row is not None and row[2] is not None:
            cursor.execute(
                f"UPDATE {REGISTRY} SET version = %s, alarm_at = NULL, hibernated_at = NULL"
                " WHERE user_id = %s",
                [PURGED, user_id],
            )
        else:
            cursor.execute(f"DELETE FROM {REGISTRY} WHERE user_id = %s", [user_id])
    known.forget(user_id)
    return row is not None and row[1] != PURGED


def finish_deletion(user_id: str, using: str = DEFAULT_DB_ALIAS) -> None:
    """The account's deletion is complete: drop whatever schema is left and clear the
    tombstone, so a new account with the same stable id (the same email) starts afresh."""
    purge_schema(user_id, using)
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(f"DELETE FROM {REGISTRY} WHERE user_id = %s", [user_id])
    known.forget(user_id)


def lookup(user_id: str) -> UserSchema | None:
    return UserSchema.objects.filter(user_id=user_id).first()
