"""Current use of the non-daily limits, counted where each resource lives.

Row limits count the owner's rows in their public tables; meter-backed limits ask the
UserMeter actor; resources whose authority is another app's actor (stored mail in the
Mailbox, repo sessions in RepoSessionIndex, workflows in RunLog) are counted by a function that
app registers with ``register_counter``. Until it does, the resource reports ``None``
(unknown) rather than a guess, and enforcement of that resource stays with its app.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db import ProgrammingError, connection

from apps.entitlements.services import metering as meter

Counter = Callable[[str], int | None]  # stable_user_id -> current use
_COUNTERS: dict[str, Counter] = {}
# resource -> the actor that is its authority (a user it never ran for has none: 0).
_COUNTER_ACTORS: dict[str, str] = {}
# resource -> one ``SELECT COUNT(*) …`` over that actor's own tables, for the UserMeter's
# ``snapshot`` to run in the user's schema, in its own transaction: the usage summary then
# asks no second actor (the same schema and owner-row lock, as the JobManager writes the
# RunLog's run records). Only asked for when the actor's table set exists.
_SCHEMA_COUNTS: dict[str, str] = {}

# resource -> (table, SQL condition with %(uid)s); every condition is owner-scoped.
_TABLE_COUNTS: dict[str, tuple[str, str]] = {
    "repos": ("user_repos", "user_id = %(uid)s"),
    "saved_packages": ("saved_packages", "user_id = %(uid)s"),
    "scheduled_jobs": ("jobs", "user_id = %(uid)s"),
    "secrets": (
        "secret_entries",
        "bucket_id IN (SELECT id FROM secret_buckets WHERE user_id = %(uid)s)",
    ),
}


def register_counter(
    name: str, counter: Counter, *, actor: str | None = None, schema_count: str | None = None
) -> None:
    """``counter(uid)`` counts ``name`` for one user. ``actor``: the actor whose state it
    counts, so a user with no tables of that actor counts 0 without a call; ``schema_count``:
    the same count as one SQL statement over that actor's tables (unqualified: it runs with
    the user's schema as the search path), read inside the meter's snapshot."""
    if schema_count is not None and actor is None:
        raise ValueError("a schema count reads an actor's tables: name the actor")
    _COUNTERS[name] = counter
    if actor is not None:
        _COUNTER_ACTORS[name] = actor
    if schema_count is not None:
        _SCHEMA_COUNTS[name] = schema_count


def schema_count_sql(name: str) -> str | None:
    return _SCHEMA_COUNTS.get(name)


# Tables seen to exist (migrations add tables and never drop these): asked of the catalog
# until found, then never again in this process, not once per count.
_EXISTING: set[str] = set()


def _counted(cursor: Any, names: Iterable[str]) -> list[str]:
    """Those of the table-count ``names`` whose table exists (the catalog is asked only about
    tables not seen yet)."""
    wanted = [name for name in names if name in _TABLE_COUNTS]
    missing = {_TABLE_COUNTS[name][0] for name in wanted} - _EXISTING
    if missing:
        _EXISTING.update(missing & set(connection.introspection.table_names(cursor)))
    return [name for name in wanted if _TABLE_COUNTS[name][0] in _EXISTING]


def _count_sql(name: str) -> str:
    table, condition = _TABLE_COUNTS[name]
    return f'SELECT COUNT(*) FROM "{table}" WHERE {condition}'


def _table_count(name: str, uid: str) -> int | None:
    with connection.cursor() as cursor:
        if not _counted(cursor, [name]):
            return None
        cursor.execute(_count_sql(name), {"uid": uid})
        return int(cursor.fetchone()[0])


@dataclass(frozen=True)
class Local:
    """What ``read_local`` found for one user in one query."""

    tables: dict[str, int | None]  # resource -> its table count (None: no such table)
    bucket_bytes: int  # the storage buckets' estimated bytes
    schema: bool  # the user has a (not purged) schema
    created: frozenset[str] | None  # its actor table sets (None: all of them)

    def has_state(self, name: str) -> bool:
        """Whether the actor behind counter ``name`` has tables for this user (True for a
        counter that names no actor: it decides for itself)."""
        from kody.userschema import tablesets

        actor = _COUNTER_ACTORS.get(name)
        if actor is None or actor not in tablesets.sets():
            return True
        if not self.schema:
            return False
        return tablesets.is_created(None if self.created is None else list(self.created), actor)


# Sessions (raw psycopg connections) -> the names of the statements prepared in them.
_PREPARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
# invalid_sql_statement_name: the session lost its prepared statements (a pooler, DISCARD).
_NOT_PREPARED = "26000"


def _execute_prepared(cursor: Any, sql: str, arg: str) -> Any:
    """``sql`` (one ``$1`` text parameter) as a session-level prepared statement: ``PREPARE``d
    the first time this session runs it, then ``EXECUTE name(arg)`` — one simple-protocol
    statement through Django's cursor, as before, that Postgres no longer plans (after five
    runs it keeps a generic plan; DDL on the tables re-plans it by itself). ``read_local``'s
    seven subqueries cost 0.3-0.5 ms to plan and 0.1 ms to run; planned on every
    ``accountUsage`` call they were 7.7 % of Postgres' busy samples in a 10,000-job drain.
    ``PREPARE`` is not transactional (a rollback keeps it). A session that lost it (a
    transaction-mode pooler handing out another backend) fails the ``EXECUTE``: outside a
    transaction it is prepared again and run once more; inside one the error stands."""
    raw = connection.connection
    name = "kody_" + hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
    known = _PREPARED.setdefault(raw, set())
    for attempt in (1, 2):
        if name not in known:
            cursor.execute(f"PREPARE {name}(text) AS {sql}")
            known.add(name)
        try:
            cursor.execute(f"EXECUTE {name}(%s)", [arg])
            return cursor.fetchone()
        except ProgrammingError as exc:
            lost = getattr(exc.__cause__, "sqlstate", None) == _NOT_PREPARED
            if not lost or attempt == 2 or connection.in_atomic_block:
                raise
            known.discard(name)
    raise AssertionError("unreachable")


def read_local(uid: str, names: Iterable[str]) -> Local:
    """The table counts among ``names``, the storage buckets' estimate and the user's actor
    table sets, in ONE query (the usage summary's; before, one round trip each), prepared
    once per session (``_execute_prepared``)."""
    from apps.entitlements.services.storage import storage_buckets

    UserStorageBucket = storage_buckets()
    from kody.userschema.schemas import PURGED, REGISTRY

    wanted = [name for name in names if name in _TABLE_COUNTS]
    tables: dict[str, int | None] = {name: None for name in wanted}
    with connection.cursor() as cursor:
        present = _counted(cursor, wanted)
        columns = [f"({_count_sql(name)})" for name in present]
        buckets = UserStorageBucket._meta.db_table
        columns += [
            f"(SELECT COALESCE(SUM(estimated_bytes), 0) FROM {buckets} WHERE user_id = %(uid)s)",
            f"EXISTS (SELECT 1 FROM {REGISTRY} WHERE user_id = %(uid)s AND version <> {PURGED})",
            f"(SELECT table_sets FROM {REGISTRY} WHERE user_id = %(uid)s)",
        ]
        sql = ("SELECT " + ", ".join(columns)) % {"uid": "$1"}
        row = _execute_prepared(cursor, sql, uid)
    for index, name in enumerate(present):
        tables[name] = int(row[index])
    bucket_bytes, schema, created = row[len(present) :]
    return Local(
        tables=tables,
        bucket_bytes=int(bucket_bytes),
        schema=bool(schema),
        created=None if created is None else frozenset(created),
    )


def _storage_bytes(uid: str) -> int:
    from apps.entitlements.services.storage import bucket_estimate_total

    return int(meter.read_storage_bytes(uid)["bytes"]) + bucket_estimate_total(uid)


def count(uid: str, name: str) -> int | None:
    if name in _COUNTERS:
        return _COUNTERS[name](uid)
    if name == "storage_bytes":
        return _storage_bytes(uid)
    if name == "package_services":
        return int(meter.count_package_services(uid, status="running"))
    if name == "persistent_package_services":
        return int(meter.count_package_services(uid, status="running", mode="persistent"))
    if name == "email_message_bytes":
        return 0  # a per-message cap: assert_within(user, name, n=message_size)
    if name in _TABLE_COUNTS:
        return _table_count(name, uid)
    return None
