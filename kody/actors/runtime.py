"""Running calls: one transaction per batch (group commit across users), in arrival order.

Design note. A shard worker hands ``execute`` every call it drained. Calls are grouped by
user, keeping each user's order. A batch holding several users runs in ONE transaction; per
user: ``SET LOCAL search_path``, lock the owner row (``SELECT ... FOR UPDATE``), refuse the
user's calls if the owner differs, skip calls whose idempotency key already has a record
(their stored outcome is the answer), run the rest and write their records — then one COMMIT
for the whole batch. The first attempt runs without any savepoint, which is what makes group
commit cheap. If anything in it raises, the transaction is rolled back and the batch runs
again with one savepoint per user (whose scope restores ``search_path`` at its end); a user
whose method raises is rolled back to that savepoint and rerun with one savepoint per call,
so a failing call cannot undo its neighbours, nor a failing user the other users. A user
that fails in any other way (schema gone, an unexpected error) is rolled back to its
savepoint and run alone, after the batch commits, the way a single user always runs.

Each user maps to one shard and a shard has one consumer, so a batch takes owner-row locks
no other batch wants; inline calls hold at most one user's lock, so there is no lock cycle.
A batch with one user, and every call made inside a caller's transaction (inline), runs as
one transaction per user as before.

Every transaction that commits calls ends with ``fence.check`` (``kody.actors.fence``): a
shard consumer that lost its shard raises ``FenceLost`` there, before COMMIT, and ``execute``
lets it through without answering anyone.
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

from kody.actors import fence
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
    ordered = list(groups.values())
    if len(ordered) > 1 and not connections[using].in_atomic_block:
        results = _run_batch(ordered, using)
    else:
        results = [_run_group(group, using) for group in ordered]
    for group, group_outcomes in zip(ordered, results, strict=True):
        for index, outcome in zip(group.indexes, group_outcomes, strict=True):
            outcomes[index] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


class _RunAlone(Exception):
    """This user's calls failed in the batch other than by a method raising: roll them back
    and run them on their own after the batch commits (the single-user path below)."""


def _run_batch(groups: list[_Group], using: str) -> list[list[Outcome]]:
    """Several users' calls in one transaction: one COMMIT for the whole batch."""
    results: list[list[Outcome] | None] = [None] * len(groups)
    batched: list[int] = []
    for index, group in enumerate(groups):
        try:
            ensure_schema(group.user_id, using)  # its own transaction when it creates
            batched.append(index)
        except Exception as exc:
            if isinstance(exc, DatabaseError) and not _usable(using):
                raise
            # Left out of the batch: _run_group below reports the failure as before.
    try:
        with transaction.atomic(using=using):
            for index in batched:
                results[index] = _in_transaction(groups[index], using, savepoints=False)
            fence.check(using)
    except Exception as exc:
        if _fatal(exc, using):
            raise
        results = [None] * len(groups)
        try:
            with transaction.atomic(using=using):
                for index in batched:
                    try:
                        results[index] = _guarded(groups[index], using)
                    except _RunAlone:
                        pass  # rolled back to its savepoint; runs alone after the commit
                fence.check(using)
        except Exception as exc:  # the batch's COMMIT itself failed: every user on its own
            if _fatal(exc, using):
                raise
            log.exception("batch transaction failed; running its users one by one")
            results = [None] * len(groups)
    for index, group in enumerate(groups):
        if results[index] is None:  # not batched, run alone, or the batch failed to commit
            results[index] = _run_group(group, using)
    return [outcomes for outcomes in results if outcomes is not None]


def _guarded(group: _Group, using: str) -> list[Outcome]:
    """One user inside the batch transaction, behind its own savepoint."""
    for savepoints in (False, True):
        try:
            with transaction.atomic(using=using):
                return _in_transaction(group, using, savepoints=savepoints)
        except _MethodRaised:
            continue  # rolled back to the user's savepoint; rerun with one per call
        except OwnerMismatch as exc:
            log.warning("refused %d call(s): %s", len(group.calls), exc)
            return [Outcome.failure(exc, recordable=False)] * len(group.calls)
        except Exception as exc:
            if isinstance(exc, DatabaseError) and not _usable(using):
                raise
            raise _RunAlone from exc
    raise AssertionError("with savepoints per call a method cannot raise out of its group")


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
        if _fatal(exc, using):
            raise
        log.exception("actor calls for %s failed", group.schema)
        return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def _fatal(exc: Exception, using: str) -> bool:
    """Errors that abandon the whole batch: the shard was lost, or the database is gone."""
    if isinstance(exc, fence.FenceLost):
        return True
    return isinstance(exc, DatabaseError) and not _usable(using)


def _usable(using: str) -> bool:
    connection = connections[using]
    return connection.connection is not None and connection.is_usable()


def _transaction(group: _Group, using: str, *, savepoints: bool) -> list[Outcome]:
    with transaction.atomic(using=using):
        outcomes = _in_transaction(group, using, savepoints=savepoints)
        fence.check(using)
        return outcomes


def _in_transaction(group: _Group, using: str, *, savepoints: bool) -> list[Outcome]:
    """One user's calls inside an open transaction (or savepoint) that the caller commits."""
    connection = connections[using]
    prelude = [
        ("SELECT owner_id FROM actor_owner WHERE id = 1 FOR UPDATE", ()),
        (
            "SELECT id, outcome::text FROM actor_calls WHERE id = ANY(%s)",
            [[call.id for call in group.calls]],
        ),
    ]
    with user_schema_scope(group.schema, using, then=prelude) as (owner, records):
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
    # BaseException too: a method that raises SystemExit, KeyboardInterrupt or its own
    # BaseException subclass fails its call like any other error. Letting it escape would end
    # the consumer with the batch still in flight, and every successor would replay it and
    # fall the same way.
    if not savepoints:
        try:
            return Outcome.success(bound(*call.args, **call.kwargs))
        except BaseException as exc:
            raise _MethodRaised from exc
    try:
        with transaction.atomic(using=using):
            return Outcome.success(bound(*call.args, **call.kwargs))
    except DatabaseError as exc:
        return Outcome.failure(exc, recordable=False)
    except BaseException as exc:
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
