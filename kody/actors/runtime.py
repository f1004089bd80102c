"""Running calls: one transaction per user per batch (group commit), in arrival order.

Design note. A shard worker hands ``execute`` every call it drained. Calls are grouped by
user, keeping each user's order. Per group, one transaction: ``SET LOCAL search_path``, lock
the owner row (``SELECT ... FOR UPDATE``), refuse the whole group if the owner differs, skip
calls whose idempotency key already has a record (their stored outcome is the answer), run the
rest, and write their records — then one COMMIT for all of them. The first attempt runs the
methods without savepoints, which is what makes group commit cheap; if any method raises, the
transaction is rolled back and the group runs again with one savepoint per call, so a failing
call cannot undo its neighbours. Inline calls use this same path with a group of one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.utils import CursorWrapper
from django.db.utils import ProgrammingError

from kody.actors.base import CallContext, actor_named, method_of
from kody.actors.errors import OwnerMismatch
from kody.actors.wire import Call, Outcome
from kody.userschema.schemas import ensure_schema, known
from kody.userschema.scope import user_schema_scope

log = logging.getLogger("kody.actors")

CALL_RECORD_RETENTION = timedelta(days=1)
PRUNE_EVERY_SECONDS = 3600.0


class _MethodRaised(Exception):
    """A method raised during the savepoint-free attempt; rerun the group with savepoints."""


@dataclass
class _Group:
    user_id: str
    schema: str
    indexes: list[int] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)


def execute(calls: Sequence[Call], using: str = DEFAULT_DB_ALIAS) -> list[Outcome]:
    """Run calls and return their outcomes in the same order. Raises only if the database is
    unreachable (the caller keeps the batch and retries it)."""
    outcomes: list[Outcome | None] = [None] * len(calls)
    groups: dict[tuple[str, str], _Group] = {}
    for index, call in enumerate(calls):
        group = groups.setdefault((call.user_id, call.schema), _Group(call.user_id, call.schema))
        group.indexes.append(index)
        group.calls.append(call)
    for group in groups.values():
        for index, outcome in zip(group.indexes, _run_group(group, using), strict=True):
            outcomes[index] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


def _run_group(group: _Group, using: str) -> list[Outcome]:
    try:
        ensure_schema(group.user_id, using)
        try:
            return _transaction(group, using, savepoints=False)
        except _MethodRaised:
            return _transaction(group, using, savepoints=True)
        except ProgrammingError:
            # The schema went away under our cache (purged elsewhere): re-check once.
            if not _usable(using):
                raise
            known.forget(group.user_id)
            ensure_schema(group.user_id, using)
            return _transaction(group, using, savepoints=True)
    except OwnerMismatch as exc:
        log.warning("refused %d call(s): %s", len(group.calls), exc)
        return [Outcome.failure(exc, recordable=False)] * len(group.calls)
    except Exception as exc:
        if isinstance(exc, DatabaseError) and not _usable(using):
            raise
        log.exception("actor calls for %s failed", group.schema)
        return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def _usable(using: str) -> bool:
    connection = connections[using]
    return connection.connection is not None and connection.is_usable()


def _transaction(group: _Group, using: str, *, savepoints: bool) -> list[Outcome]:
    connection = connections[using]
    prelude = [
        ("SELECT owner_id FROM actor_owner WHERE id = 1 FOR UPDATE", ()),
        (
            "SELECT id, outcome::text FROM actor_calls WHERE id = ANY(%s)",
            [[call.id for call in group.calls]],
        ),
    ]
    with (
        transaction.atomic(using=using),
        user_schema_scope(group.schema, using, then=prelude) as (owner, records),
    ):
        if not owner or owner[0][0] != group.user_id:
            raise OwnerMismatch(f"schema {group.schema} does not belong to the calling user")
        done = {call_id: Outcome.parse(text) for call_id, text in records}
        fresh: list[tuple[Call, Outcome]] = []
        results: list[Outcome] = []
        for call in group.calls:
            outcome = done.get(call.id)
            if outcome is None:
                outcome = _invoke(call, using, savepoints=savepoints)
                done[call.id] = outcome
                if outcome.recordable:
                    fresh.append((call, outcome))
            results.append(outcome)
        with connection.cursor() as cursor:
            _record(cursor, fresh)
            _maybe_prune(cursor, group.user_id)
    return results


def _invoke(call: Call, using: str, *, savepoints: bool) -> Outcome:
    try:
        actor = actor_named(call.actor)
        bound = getattr(
            actor(CallContext(call.user_id, call.schema, call.id, using)),
            method_of(actor, call.method),
        )
    except Exception as exc:  # unknown actor/method: nothing ran, nothing to record
        return Outcome.failure(exc, recordable=False)
    if not savepoints:
        try:
            return Outcome.success(bound(*call.args, **call.kwargs))
        except Exception as exc:
            raise _MethodRaised from exc
    try:
        with transaction.atomic(using=using):
            return Outcome.success(bound(*call.args, **call.kwargs))
    except DatabaseError as exc:
        return Outcome.failure(exc, recordable=False)
    except Exception as exc:
        return Outcome.failure(exc)


def _record(cursor: CursorWrapper, fresh: list[tuple[Call, Outcome]]) -> None:
    if not fresh:
        return
    rows = ", ".join(["(%s, %s, %s, %s::jsonb, now())"] * len(fresh))
    params: list[str] = []
    for call, outcome in fresh:
        params += [call.id, call.actor, call.method, outcome.text]
    cursor.execute(
        f"INSERT INTO actor_calls (id, actor, method, outcome, created_at) VALUES {rows}"
        " ON CONFLICT (id) DO NOTHING",
        params,
    )


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


def _maybe_prune(cursor: CursorWrapper, user_id: str) -> None:
    if _prune_clock.due(user_id):
        cursor.execute(
            "DELETE FROM actor_calls WHERE created_at < now() - %s", [CALL_RECORD_RETENTION]
        )
