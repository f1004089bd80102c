"""The plain path: any method, several users in one transaction.

A prelude round trip (search path and timeouts, the owner-lock statement read back instead
of failing, every call's record and every user's tombstone in one read), then each user's
methods through Django's cursor (the next user's search path rides on its first statement),
then one query with every new call record, the fence guard and ``COMMIT``
(``kody.actors.records``). A refused user (foreign owner, tombstone) is answered without
running; a recorded call is answered from its record.

The first attempt runs without savepoints, which is what makes several users in one
transaction cheap. If anything raises, it is rolled back and run again with a savepoint per
user (and, for a user whose method raised, per call), so a failing call cannot undo its
neighbours. A user that fails in any other way runs on its own after the batch commits
(``alone``), where a schema that vanished under the process's cache is re-ensured once.
Inside a caller's ``atomic()`` only ``alone`` runs, behind a savepoint, with the caller's
lock order checked first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import ProgrammingError

from kody.actors.base import CallContext, actor_named, is_deletion_safe, method_of
from kody.actors.batch import (
    REFUSED,
    Group,
    actor_timeouts,
    failed,
    fatal,
    mismatch,
    owner_locks,
    refuse,
    usable,
)
from kody.actors.errors import LockOrderRefused
from kody.actors.errors import timeout_reason as _timeout_reason
from kody.actors.errors import typed_timeout as _typed
from kody.actors.records import finish, record_statements
from kody.actors.wire import Call, Outcome
from kody.errors import AccountDeleting
from kody.userschema.naming import quoted
from kody.userschema.schemas import REGISTRY, ensure_schema, known
from kody.userschema.scope import (
    DeferredSearchPath,
    Statement,
    deferred_search_path,
    user_schema_scope,
)

log = logging.getLogger("kody.actors")


class _MethodRaised(Exception):
    """A method raised during the savepoint-free attempt; rerun with savepoints."""


class _RunAlone(Exception):
    """This user failed in the batch other than by a method raising: it runs on its own
    after the batch commits."""


def plain(groups: list[Group], connection: BaseDatabaseWrapper) -> list[list[Outcome] | None]:
    """Every user's calls in one transaction; a user whose outcome is None runs alone."""
    results: list[list[Outcome] | None] = [None] * len(groups)
    running: int | None = None
    try:
        with (
            transaction.atomic(using=connection.alias),
            _prelude(groups, connection) as (
                checked,
                path,
            ),
        ):
            writes: list[Statement] = []
            for running, (group, check) in enumerate(zip(groups, checked, strict=True)):
                if not check.mine:
                    results[running] = refuse(group, mismatch(group))
                    continue
                if running and path is not None:
                    path.switch(group.schema)  # sent with the user's first statement
                results[running], pending = _run_calls(group, connection, check, savepoints=False)
                writes += pending
            running = None  # past the users: a failure now is the records', fence's or COMMIT's
            finish(writes, connection)
        return results
    except Exception as exc:
        if fatal(exc, connection):
            raise
        results = [None] * len(groups)
        stuck = running if running is not None else (0 if len(groups) == 1 else None)
        if stuck is not None and _timeout_reason(exc):
            # Waited out a lock (or a statement ran too long) outside any method: answer that
            # user now rather than wait again in the rerun.
            results[stuck] = refuse(groups[stuck], _typed(exc))
    rerun = [index for index, outcomes in enumerate(results) if outcomes is None]
    try:
        with transaction.atomic(using=connection.alias):
            writes = []
            for index in rerun:
                try:
                    results[index], pending = _guarded(groups[index], connection)
                    writes += pending
                except _RunAlone:
                    pass  # rolled back to its savepoint; runs alone after the commit
            finish(writes, connection)
    except Exception as exc:  # the rerun's COMMIT itself failed: every user on its own
        if fatal(exc, connection):
            raise
        log.exception("batch transaction failed; running its users one by one")
        for index in rerun:
            results[index] = None
    return results


def _guarded(
    group: Group, connection: BaseDatabaseWrapper
) -> tuple[list[Outcome], list[Statement]]:
    """One user inside the batch's rerun, behind its own savepoint: its outcomes and its
    record writes (sent with the batch's fence guard)."""
    for savepoints in (False, True):
        try:
            with transaction.atomic(using=connection.alias):
                return _in_scope(group, connection, savepoints=savepoints)
        except _MethodRaised:
            continue  # rolled back to the user's savepoint; rerun with one per call
        except REFUSED as exc:
            return refuse(group, exc), []
        except Exception as exc:
            if isinstance(exc, DatabaseError) and not usable(connection):
                raise
            if _timeout_reason(exc):
                return refuse(group, _typed(exc)), []
            raise _RunAlone from exc
    raise AssertionError("with savepoints per call a method cannot raise out of its group")


def alone(group: Group, connection: BaseDatabaseWrapper) -> list[Outcome]:
    """One user's calls in a transaction of their own (inside a caller's transaction: a
    savepoint of it, never committed here)."""
    try:
        ensure_schema(group.user_id, connection.alias, actors=group.actors)
        if connection.in_atomic_block:
            _check_lock_order(group.user_id, connection)
        savepoints, reensured = False, False
        while True:
            try:
                with transaction.atomic(using=connection.alias):
                    outcomes, writes = _in_scope(group, connection, savepoints=savepoints)
                    finish(writes, connection)
                    return outcomes
            except _MethodRaised:
                savepoints = True
            except ProgrammingError:
                # The schema went away under the process's cache (hibernated or purged
                # elsewhere): ensure it once more, which restores or refuses.
                if reensured or not usable(connection):
                    raise
                known.forget(group.user_id)
                ensure_schema(group.user_id, connection.alias, actors=group.actors)
                savepoints, reensured = True, True
    except Exception as exc:
        return failed(group, exc, connection)


def _in_scope(
    group: Group, connection: BaseDatabaseWrapper, *, savepoints: bool
) -> tuple[list[Outcome], list[Statement]]:
    """One user's calls inside an open transaction or savepoint that the caller ends."""
    with _prelude([group], connection) as (checked, _):
        check = checked[0]
        if not check.mine:
            raise mismatch(group)
        return _run_calls(group, connection, check, savepoints=savepoints)


@dataclass
class _Check:
    mine: bool  # the owner row is there, names the user, and is locked
    done: dict[str, Outcome]  # the calls that already have a record: their outcome
    restricted: bool  # marked for deletion: only deletion-safe methods run


@contextmanager
def _prelude(
    groups: Sequence[Group], connection: BaseDatabaseWrapper
) -> Iterator[tuple[list[_Check], DeferredSearchPath | None]]:
    """The plain path's first round trip: the first user's search path and the timeouts,
    every owner row locked (one statement, the users' order; ``NOWAIT`` for several users,
    so a row held elsewhere sends the batch to its rerun, where each lock waits at most
    ``lock_timeout``), then every call's record and every user's tombstone in one read."""
    reads = [
        f"SELECT {index}, id::text, outcome::text FROM {quoted(group.schema)}.actor_calls"
        " WHERE id = ANY(%s)"
        for index, group in enumerate(groups)
    ]
    reads.append(
        f"SELECT -1, user_id::text, NULL FROM {REGISTRY}"
        " WHERE user_id = ANY(%s) AND deleting_at IS NOT NULL"
    )
    params = [[call.id for call in group.calls] for group in groups]
    params.append([group.user_id for group in groups])
    then = [(owner_locks(groups), ()), ("\nUNION ALL ".join(reads), params)]
    # One user needs no switch (and a nested call must not take over a batch's).
    switching = deferred_search_path(connection) if len(groups) > 1 else nullcontext()
    with (
        user_schema_scope(groups[0].schema, connection, then=then, timeouts=actor_timeouts()) as (
            locks,
            records,
        ),
        switching as path,
    ):
        checks = [_Check(False, {}, False) for _ in groups]
        for index, mine in locks:
            checks[index].mine = mine
        marked = set()
        for index, key, text in records:
            if index < 0:
                marked.add(key)
            else:
                checks[index].done[key] = Outcome.parse(text)
        for group, check in zip(groups, checks, strict=True):
            check.restricted = group.user_id in marked
        yield checks, path


def _run_calls(
    group: Group, connection: BaseDatabaseWrapper, check: _Check, *, savepoints: bool
) -> tuple[list[Outcome], list[Statement]]:
    """One user's calls once its owner lock is held: recorded ones answered from their
    records, the rest run; their outcomes and the statements recording the new ones."""
    fresh: list[tuple[Call, Outcome]] = []
    results: list[Outcome] = []
    for call in group.calls:
        outcome = check.done.get(call.id)
        if outcome is None:
            outcome = _invoke(call, connection, savepoints=savepoints, restricted=check.restricted)
            check.done[call.id] = outcome  # the same id twice in a batch: one run
            if outcome.recordable:
                fresh.append((call, outcome))
        results.append(outcome)
    return results, record_statements(group, fresh)


def _invoke(
    call: Call, connection: BaseDatabaseWrapper, *, savepoints: bool, restricted: bool = False
) -> Outcome:
    try:
        actor = actor_named(call.actor)
        bound = getattr(
            actor(CallContext(call.user_id, call.schema, call.id, connection.alias)),
            method_of(actor, call.method),
        )
        if restricted and not is_deletion_safe(actor, call.method):
            raise AccountDeleting(details={"actor": call.actor, "method": call.method})
    except Exception as exc:  # unknown actor/method, or refused: nothing ran, nothing recorded
        return Outcome.failure(exc, recordable=False)
    # BaseException too: a method that raises SystemExit, KeyboardInterrupt or its own
    # BaseException subclass fails its call like any other error. Letting it escape would end
    # the consumer with the batch in flight, and every successor would replay it and fall.
    if not savepoints:
        try:
            return Outcome.success(bound(*call.args, **call.kwargs))
        except BaseException as exc:
            raise _MethodRaised from exc
    try:
        with transaction.atomic(using=connection.alias):
            return Outcome.success(bound(*call.args, **call.kwargs))
    except DatabaseError as exc:
        return Outcome.failure(_typed(exc), recordable=False)
    except BaseException as exc:
        return Outcome.failure(exc)


def _check_lock_order(user_id: str, connection: BaseDatabaseWrapper) -> None:
    """Inside a caller's transaction: refuse to lock a user below one this transaction
    already locked (the owner-row lock is held until the caller's COMMIT)."""
    # A test case's own wrapping transaction stands in for autocommit: the calls a test makes
    # outside any atomic() of its own would each commit alone in real use, so the order is
    # kept per atomic() the code itself opened (Django marks the test case's blocks).
    own = [
        index
        for index, block in enumerate(connection.atomic_blocks)
        if not getattr(block, "_from_testcase", False)
    ]
    if not own:
        return
    outermost = own[0]
    savepoint = connection.savepoint_ids[outermost - 1] if outermost else None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text")
        scope = (cursor.fetchone()[0], savepoint)
    held: tuple[tuple[str, str | None], set[str]] | None = getattr(
        connection, "kody_user_locks", None
    )
    if held is None or held[0] != scope:
        held = (scope, set())
        connection.kody_user_locks = held  # type: ignore[attr-defined]
    users = held[1]
    if users and user_id not in users and user_id < max(users):
        raise LockOrderRefused(
            f"this transaction already holds the actor lock of user {max(users)}; calling "
            f"user {user_id} inline inside the same atomic() would take user locks out of "
            "their one order (ascending stable id) and could deadlock a shard's batch. "
            "Call the users in ascending id order, or outside one atomic()."
        )
    users.add(user_id)
