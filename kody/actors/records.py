"""Call records and the end of an actor transaction, shared by both paths of the runtime.

Each new call's outcome is kept in its user's ``actor_calls`` (the call id is the key: a
call pushed again is answered from its record), pruned now and then. The records of every
user of a batch, the fence guard and ``COMMIT`` go out in one round trip.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from datetime import timedelta

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from kody.actors import fence
from kody.actors.batch import Group, literal
from kody.actors.wire import Call, Outcome
from kody.userschema.naming import quoted
from kody.userschema.scope import Statement, in_one_query

CALL_RECORD_RETENTION = timedelta(days=1)
PRUNE_EVERY_SECONDS = 3600.0


def finish(writes: list[Statement], connection: BaseDatabaseWrapper) -> None:
    """Every user's call records, the fence guard and — for the outermost transaction — its
    ``COMMIT``, in one round trip. A failure anywhere (the guard's when the shard was lost)
    stops the statements after it, so the COMMIT never runs and ``atomic()`` rolls back as
    usual. When it succeeds Postgres has committed: the block's own COMMIT finds nothing to
    do (psycopg sends nothing when idle) and on-commit hooks run as usual."""
    statements = merged(writes) + ending(connection)
    if statements:
        send(connection, statements, rows=False)


def ending(connection: BaseDatabaseWrapper) -> list[Statement]:
    statements: list[Statement] = []
    guard = fence.guard()
    if guard is not None:
        statements.append(guard)
    if len(connection.atomic_blocks) == 1 and not connection.needs_rollback:
        statements.append(("COMMIT", ()))
    return statements


def send(
    connection: BaseDatabaseWrapper, statements: list[Statement], *, rows: bool | set[int]
) -> list[list[tuple]]:
    """``in_one_query``, with the fence guard's failure raised as ``FenceLost``."""
    try:
        return in_one_query(connection, statements, rows=rows)
    except DatabaseError as exc:
        fenced = fence.lost(exc)
        if fenced is not None:
            raise fenced from exc
        raise


def merged(writes: list[Statement]) -> list[Statement]:
    """Several users' record writes as ONE statement (data-modifying CTEs, each run to
    completion whether or not anything reads it): parsed, planned and started once."""
    if len(writes) < 2:
        return list(writes)
    ctes = ", ".join(f"w{index} AS ({sql})" for index, (sql, _) in enumerate(writes))
    return [(f"WITH {ctes} SELECT 1", [param for _, each in writes for param in each])]


def record_statements(group: Group, fresh: list[tuple[Call, Outcome]]) -> list[Statement]:
    """One multi-row insert of the user's new call records, and now and then the prune; as
    literal SQL (schema-qualified, so they can go out after other users' calls)."""
    table = f"{quoted(group.schema)}.actor_calls"
    statements: list[Statement] = []
    if fresh:
        rows = ", ".join(
            f"({literal(call.id)}, {literal(call.actor)}, {literal(call.method)},"
            f" {literal(outcome.text)}::jsonb, now())"
            for call, outcome in fresh
        )
        statements.append(
            (
                f"INSERT INTO {table} (id, actor, method, outcome, created_at) VALUES {rows}"
                " ON CONFLICT (id) DO NOTHING",
                (),
            )
        )
    if _prune_clock.due(group.user_id):
        seconds = int(CALL_RECORD_RETENTION.total_seconds())
        statements.append(
            (f"DELETE FROM {table} WHERE created_at < now() - interval '{seconds} seconds'", ())
        )
    return statements


class _PruneClock:
    """When this process last pruned each user's call records (bounded)."""

    def __init__(self, size: int = 100_000) -> None:
        self._size = size
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def due(self, user_id: str) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(user_id)
            if last is not None and now - last < PRUNE_EVERY_SECONDS:
                return False
            self._seen[user_id] = now
            self._seen.move_to_end(user_id)
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return True


_prune_clock = _PruneClock()
