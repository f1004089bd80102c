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

Locks. Each user maps to one shard and a shard has one consumer, so no two batches want the
same owner-row lock; but an inline call made inside a caller's ``atomic()`` holds its user's
lock until that outer transaction ends, and such a caller may call several users. So every
transaction takes owner-row locks in one order, ascending stable user id: a batch runs its
users sorted, and an inline call inside a caller's transaction that would lock a user below
one it already holds is refused (``LockOrderRefused``) before it waits. Locks other than
owner rows (public rows a method updates) are not ordered by the kernel; for those, and for
an outer transaction that simply holds a user's lock for long, every actor transaction sets
``lock_timeout`` and ``statement_timeout`` (``KODY_ACTOR_LOCK_TIMEOUT_MS``,
``KODY_ACTOR_STATEMENT_TIMEOUT_MS``): the call that hits one fails alone with
``ActorUnavailable`` (unrecorded, so a retry with its key runs again) and the batch goes on.

Accounts. A user with no schema gets one only if the account directory says the account is
live (``kody.userschema.accounts``); otherwise its calls fail with ``NoLiveAccount`` or
``AccountDeleting`` and nothing is created. The registry's deletion tombstone is read in the
same round trip as the owner lock; while it is set only ``@deletion_safe`` methods run and
the rest are answered ``AccountDeleting``, unrecorded.

A batch with one user, and every call made inside a caller's transaction (inline), runs as
one transaction per user as before. One user's calls outside any transaction (a lone inline
call, a shard's one-user batch) send that prelude with the first method's first statement,
its checks as failing statements (``_run_fresh``, ADR 0027); the record lookup becomes one
more such check, left out for a call without an idempotency key (``fresh``; ADR 0033).

A batch of several users tries the same first (``_run_fresh_batch``, ADR 0033 amendment):
its ``BEGIN``, timeouts and checks — every owner row locked ``NOWAIT`` in one statement (one per
user, each prepared, with prepared statements on: ADR 0038) and equal to its user, the
tombstones, the call records — go out with the first user's first
statement, each next user's search path with that user's first, so the batch costs C + 1
round trips instead of C + 2. A check that fails rolls it back and the batch runs as above
(a lock held elsewhere or a method raising: straight to its savepoint rerun).

Every transaction that commits calls ends with the fence guard (``kody.actors.fence``): a
shard consumer that lost its shard raises ``FenceLost`` there, before COMMIT, and ``execute``
lets it through without answering anyone. The call records, the guard and the COMMIT go out
in one round trip (``_finish``). A lone call whose statement form is a ``Planned`` sends even
those with its prelude and its statement, its record joined to the statement as one more CTE
holding the statement's rows: one round trip in all (``_run_carried``, ADR 0042); so does a
batch whose every statement is one (ADR 0043).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import IntegrityError, ProgrammingError

from kody.actors import fence, prepared
from kody.actors.base import (
    CallContext,
    Planned,
    actor_named,
    is_deletion_safe,
    method_of,
    statement_form,
)
from kody.actors.errors import LockOrderRefused, OwnerMismatch
from kody.actors.errors import timeout_reason as _timeout_reason
from kody.actors.errors import typed_timeout as _typed
from kody.actors.wire import Call, Outcome
from kody.errors import AccountDeleting
from kody.userschema.accounts import NoLiveAccount
from kody.userschema.naming import quoted
from kody.userschema.schemas import REGISTRY, ensure_schema, known
from kody.userschema.scope import (
    Statement,
    deferred_prelude,
    deferred_search_path,
    in_one_query,
    path_statement,
    set_timeouts,
    user_schema_scope,
)

log = logging.getLogger("kody.actors")

CALL_RECORD_RETENTION = timedelta(days=1)
PRUNE_EVERY_SECONDS = 3600.0


class _MethodRaised(Exception):
    """A method raised during the savepoint-free attempt; rerun the group with savepoints."""


# Refusals of a whole user's calls: nothing ran, nothing to record.
_REFUSED = (OwnerMismatch, AccountDeleting, NoLiveAccount, LockOrderRefused)


@dataclass
class _Group:
    user_id: str
    schema: str
    indexes: list[int] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    @property
    def actors(self) -> set[str]:
        # Their table sets are created on their first call (kody.userschema.tablesets).
        return {call.actor for call in self.calls}


def execute(
    calls: Sequence[Call], using: str = DEFAULT_DB_ALIAS, *, fresh: bool = False
) -> list[Outcome]:
    """Run calls and return their outcomes in the same order. Raises only if the database is
    unreachable (the caller keeps the batch and retries it).

    ``fresh``: the caller vouches that no call here can have run before — an inline call
    whose id was generated for it a moment ago (``dispatch``), never one off the queue (a
    redelivery repeats its id) nor one with the caller's key: its optimistic prelude skips
    the record check. Any one user's calls outside a transaction take that prelude
    (``_run_fresh``), several users' calls its batch form (``_run_fresh_batch``); a fresh
    call's has no record check."""
    outcomes: list[Outcome | None] = [None] * len(calls)
    groups: dict[tuple[str, str], _Group] = {}
    for index, call in enumerate(calls):
        group = groups.setdefault((call.user_id, call.schema), _Group(call.user_id, call.schema))
        group.indexes.append(index)
        group.calls.append(call)
    # One lock order for every transaction: ascending user id (see the module docstring).
    ordered = sorted(groups.values(), key=lambda group: group.user_id)
    connection = connections[using]  # once: every level below is handed the wrapper
    alone = not connection.in_atomic_block
    if len(ordered) > 1 and alone:
        results = _run_batch(ordered, connection)
    else:
        # One user outside any transaction (a lone inline call, a shard's one-user batch):
        # the optimistic prelude, checking for records unless the call is fresh.
        fresh = fresh and len(calls) == 1
        results = [
            _run_group(group, connection, optimistic=alone, fresh=fresh) for group in ordered
        ]
    for group, group_outcomes in zip(ordered, results, strict=True):
        for index, outcome in zip(group.indexes, group_outcomes, strict=True):
            outcomes[index] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


class _RunAlone(Exception):
    """This user's calls failed in the batch other than by a method raising: roll them back
    and run them on their own after the batch commits (the single-user path below)."""


def _run_batch(groups: list[_Group], connection: BaseDatabaseWrapper) -> list[list[Outcome]]:
    """Several users' calls in one transaction: one COMMIT for the whole batch. The
    optimistic prelude first (``_run_fresh_batch``), when every id can be a literal."""
    results: list[list[Outcome] | None] = [None] * len(groups)
    batched: list[int] = []
    for index, group in enumerate(groups):
        try:
            # Its own transaction when it creates.
            ensure_schema(group.user_id, connection.alias, actors=group.actors)
            batched.append(index)
        except Exception as exc:
            if isinstance(exc, DatabaseError) and not _usable(connection):
                raise
            # Left out of the batch: _run_group below reports the failure as before.
    running = None
    try:
        if len(batched) == len(groups) and all(_optimistic(each, fresh=False) for each in groups):
            # The prelude with the first user's first statement; None: a check failed, the
            # plain attempt below answers it. What it raises is handled as the plain one's.
            optimistic = _run_fresh_batch(groups, connection)
            if optimistic is not None:
                return optimistic
        with transaction.atomic(using=connection.alias), deferred_search_path(connection) as path:
            # One round trip for every user's owner lock, call records and tombstone.
            checked = _batch_prelude([groups[index] for index in batched], connection)
            writes: list[Statement] = []
            for running, (owner, done, restricted) in zip(batched, checked, strict=True):
                group = groups[running]
                if owner != group.user_id:
                    results[running] = _refuse(group, _mismatch(group))
                    continue
                path.switch(group.schema)  # sent with the user's first statement
                results[running], pending = _run_calls(
                    group, connection, done, savepoints=False, restricted=restricted
                )
                writes += pending
            running = None  # past the users: a failure now is the records', fence's or COMMIT's
            _finish(writes, connection)
    except Exception as exc:
        if _fatal(exc, connection):
            raise
        results = [None] * len(groups)
        if running is not None and _timeout_reason(exc):
            # That user waited out a lock (or a statement ran too long) outside any method:
            # answer its calls now rather than wait again in the rerun.
            results[running] = _refuse(groups[running], _typed(exc))
            batched.remove(running)
        try:
            with transaction.atomic(using=connection.alias):
                writes = []
                for index in batched:
                    try:
                        results[index], pending = _guarded(groups[index], connection)
                        writes += pending
                    except _RunAlone:
                        pass  # rolled back to its savepoint; runs alone after the commit
                _finish(writes, connection)
        except Exception as exc:  # the batch's COMMIT itself failed: every user on its own
            if _fatal(exc, connection):
                raise
            log.exception("batch transaction failed; running its users one by one")
            results = [None] * len(groups)
    for index, group in enumerate(groups):
        if results[index] is None:  # not batched, run alone, or the batch failed to commit
            results[index] = _run_group(group, connection)
    return [outcomes for outcomes in results if outcomes is not None]


def _guarded(
    group: _Group, connection: BaseDatabaseWrapper
) -> tuple[list[Outcome], list[Statement]]:
    """One user inside the batch transaction, behind its own savepoint; its outcomes and the
    writes (call records) that go out with the batch's fence check."""
    for savepoints in (False, True):
        try:
            with transaction.atomic(using=connection.alias):
                return _in_transaction(group, connection, savepoints=savepoints)
        except _MethodRaised:
            continue  # rolled back to the user's savepoint; rerun with one per call
        except _REFUSED as exc:
            return _refuse(group, exc), []
        except Exception as exc:
            if isinstance(exc, DatabaseError) and not _usable(connection):
                raise
            if _timeout_reason(exc):
                return _refuse(group, _typed(exc)), []
            raise _RunAlone from exc
    raise AssertionError("with savepoints per call a method cannot raise out of its group")


def _refuse(group: _Group, exc: Exception) -> list[Outcome]:
    log.warning("refused %d call(s) for %s: %s", len(group.calls), group.schema, exc)
    return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def _run_group(
    group: _Group, connection: BaseDatabaseWrapper, *, optimistic: bool = False, fresh: bool = False
) -> list[Outcome]:
    try:
        ensure_schema(group.user_id, connection.alias, actors=group.actors)
        if connection.in_atomic_block:
            _check_lock_order(group.user_id, connection)
        try:
            if optimistic and _optimistic(group, fresh=fresh):
                outcomes = _run_fresh(group, connection, fresh=fresh)
                # None: the optimistic attempt failed and was rolled back; the plain path
                # answers (a refusal, the method's error recorded behind its savepoint).
                return outcomes or _transaction(group, connection, savepoints=True)
            return _transaction(group, connection, savepoints=False)
        except _MethodRaised:
            return _transaction(group, connection, savepoints=True)
        except ProgrammingError:
            # The schema went away under our cache (purged elsewhere): re-check once.
            if not _usable(connection):
                raise
            known.forget(group.user_id)
            ensure_schema(group.user_id, connection.alias, actors=group.actors)
            return _transaction(group, connection, savepoints=True)
    except _REFUSED as exc:
        return _refuse(group, exc)
    except Exception as exc:
        if _fatal(exc, connection):
            raise
        if _timeout_reason(exc):
            return _refuse(group, _typed(exc))
        log.exception("actor calls for %s failed", group.schema)
        return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def _fatal(exc: Exception, connection: BaseDatabaseWrapper) -> bool:
    """Errors that abandon the whole batch: the shard was lost, or the database is gone."""
    if isinstance(exc, fence.FenceLost):
        return True
    return isinstance(exc, DatabaseError) and not _usable(connection)


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


def _usable(connection: BaseDatabaseWrapper) -> bool:
    return connection.connection is not None and connection.is_usable()


def _transaction(
    group: _Group, connection: BaseDatabaseWrapper, *, savepoints: bool
) -> list[Outcome]:
    with transaction.atomic(using=connection.alias):
        outcomes, writes = _in_transaction(group, connection, savepoints=savepoints)
        _finish(writes, connection)
        return outcomes


def _finish(writes: list[Statement], connection: BaseDatabaseWrapper) -> None:
    """The end of a transaction that ran calls: every user's call records and the fence guard
    in one round trip — and, when this is the outermost transaction, its COMMIT too.

    They go out as one multi-statement query (simple protocol, literal SQL). A failure
    anywhere (the guard's when the shard was lost) stops the statements after it, so the
    COMMIT never runs and the ``atomic()`` block rolls back as usual. When it succeeds,
    Postgres has committed: the block's own COMMIT on exit then finds no transaction open and
    sends nothing (psycopg's ``commit()`` is a no-op when idle), and on-commit hooks run as
    usual. Inside a caller's transaction (an inline call) nothing is committed here.

    The query goes out on the psycopg connection's own cursor (``in_one_query``, ADR 0036),
    not a Django cursor: what Django's cursor did for it is done here — refuse a transaction
    an inner ``atomic()`` marked for rollback (a method that swallowed its error would
    otherwise be answered as committed while the block rolls back), errors as Django's
    (``wrap_database_errors``, so ``fence.lost`` still recognises the guard's), the query in
    ``connection.queries`` when Django logs queries (``DEBUG``, ``CaptureQueriesContext``).
    When the methods sent no statement, the transaction's deferred prelude (``BEGIN``, search
    path, checks) is still pending: ``in_one_query`` sends it first, and its failure is
    ``deferred.failed`` as on a method's statement."""
    statements = _merged(writes) + _ending(connection)
    if statements:
        _send_ending(connection, statements, rows=False)


def _ending(connection: BaseDatabaseWrapper) -> list[Statement]:
    """What ends a transaction that ran calls: the fence guard, and ``COMMIT`` when this is
    the outermost transaction and nothing marked it for rollback."""
    statements: list[Statement] = []
    guard = fence.guard()
    if guard is not None:
        statements.append(guard)
    if len(connection.atomic_blocks) == 1 and not connection.needs_rollback:
        statements.append(("COMMIT", ()))
    return statements


def _send_ending(
    connection: BaseDatabaseWrapper, statements: list[Statement], *, rows: bool | set[int]
) -> list[list[tuple]]:
    """Send a query that ends with ``_ending``'s statements, as ``_finish`` describes: refuse
    a transaction marked for rollback, the guard's failure as ``FenceLost``, a strict record
    insert meeting an existing record as ``_Recorded``, the query in Django's log when it
    logs queries."""
    connection.validate_no_broken_transaction()
    started = time.monotonic() if connection.queries_logged else None
    try:
        # Literal SQL (``_literal``); a statement with parameters is bound on its own, so a
        # literal's ``%`` is never read as a placeholder.
        return in_one_query(connection, statements, rows=rows)
    except DatabaseError as exc:
        fenced = fence.lost(exc)
        if fenced is not None:
            raise fenced from exc
        if isinstance(exc, IntegrityError) and _recorded(exc):
            raise _Recorded from exc  # a strict record insert (a planned batch's) met a record
        raise
    finally:
        if started is not None:
            connection.queries_log.append(
                {
                    "sql": ";\n".join(text for text, _ in statements),
                    "time": f"{time.monotonic() - started:.3f}",
                }
            )


def _merged(writes: list[Statement]) -> list[Statement]:
    """Several users' record writes as ONE statement (data-modifying CTEs, each run to
    completion whether or not anything reads it): the server parses, plans and starts one
    statement per batch instead of one per user."""
    if len(writes) < 2:
        return list(writes)
    ctes = ", ".join(f"w{index} AS ({sql})" for index, (sql, _) in enumerate(writes))
    return [(f"WITH {ctes} SELECT 1", [param for _, each in writes for param in each])]


def _in_transaction(
    group: _Group, connection: BaseDatabaseWrapper, *, savepoints: bool
) -> tuple[list[Outcome], list[Statement]]:
    """One user's calls inside an open transaction (or savepoint) that the caller commits:
    their outcomes, and the statements recording them (schema-qualified, so they can go out
    after other users' calls, with the batch's fence check: ``_finish``)."""
    prelude = [
        ("SELECT owner_id FROM actor_owner WHERE id = 1 FOR UPDATE", ()),
        (
            "SELECT id, outcome::text FROM actor_calls WHERE id = ANY(%s)",
            [[call.id for call in group.calls]],
        ),
        # Read after the owner lock: a mark_deleting that held it is seen here.
        (f"SELECT deleting_at FROM {REGISTRY} WHERE user_id = %s", [group.user_id]),
    ]
    with user_schema_scope(group.schema, connection, then=prelude, timeouts=actor_timeouts()) as (
        owner,
        records,
        tombstone,
    ):
        if not owner or owner[0][0] != group.user_id:
            raise _mismatch(group)
        # Marked for deletion (the registry's tombstone): only deletion-safe methods run.
        restricted = bool(tombstone and tombstone[0][0] is not None)
        mine = {call.id: call for call in group.calls}
        done = {call_id: _recalled(text, mine.get(call_id)) for call_id, text in records}
        return _run_calls(group, connection, done, savepoints=savepoints, restricted=restricted)


# User ids the optimistic prelude takes. Every id in its SQL is written by ``_literal`` (any
# text but a NUL is safe there, and the prelude is never bound client-side: ADR 0034), so
# this gate is no longer what makes the text safe; it stays for user ids (an account's
# stable id is of these characters) until a test drives another user id through the prelude,
# as tests/kernel/test_call_literals.py does for call ids of every character class.
_LITERAL_ID = re.compile(r"[A-Za-z0-9_.:@+=-]{1,255}")


def _optimistic(group: _Group, *, fresh: bool) -> bool:
    """Whether one user's calls may take the optimistic prelude (``_run_fresh``): a user id
    of a stable id's characters, no call id ``_literal`` cannot write (a NUL), and no id twice
    (a call pushed twice in one batch answers its second copy from the first's outcome, which
    only the plain path does). A call id may hold anything else — a caller's key is
    ``<key>~<hash>`` — quotes, backslashes and ``%`` included (ADR 0036)."""
    if not _LITERAL_ID.fullmatch(group.user_id):
        return False
    if fresh:
        return True
    ids = [call.id for call in group.calls]
    return len(set(ids)) == len(ids) and not any("\x00" in each for each in ids)


def _run_fresh(
    group: _Group, connection: BaseDatabaseWrapper, *, fresh: bool = True
) -> list[Outcome] | None:
    """One user's calls in two round trips instead of three: the prelude goes out with the
    first method's first statement (or, if the methods send none, with the records and
    ``COMMIT``), and the checks that used to be read back before the methods ran are
    statements that FAIL instead:

    * ``BEGIN``, ``search_path`` and the timeouts (``scope.deferred_prelude``);
    * the owner lock, ``SELECT 1 / (count(*) = 1)::int`` over the owner row ``FOR UPDATE``
      filtered by the caller's id — a missing or foreign owner divides by zero (``_checks``);
    * one statement after the lock (its snapshot is taken once the lock is held, as in the
      plain prelude) that divides by zero when, unless every method is ``@deletion_safe``,
      the user is marked for deletion (the tombstone), or, unless the call is fresh
      (``execute(fresh=True)``: an id generated for this one run), any of the calls already
      has a record (a redelivery, a retry with the caller's key; ADR 0033). The plain path
      then answers the refusal or the record. A planned call (``_planned``) reads no record
      here: its record's insert fails instead (``_record_statements(strict=True)``), after
      its statement ran in the same transaction, which rolls back (ADR 0039).

    A failing check aborts the query before the method's statement runs, so no statement of
    a method reaches the database without the owner lock and every check; Postgres skips
    the rest of a multi-statement query after an error. What runs before the checks is only
    the first method's Python up to its first statement. For a redelivered call that prefix
    runs once more before its record check fails — as a batch rerun already repeats it:
    methods keep their effects in the transaction (kernel.md).

    None when anything failed (the transaction is rolled back): the caller runs the calls
    the plain way, which answers a refusal or a record, or records a method's error. For a
    lone call a lock or statement timeout in the prelude's query is answered here
    (``ActorUnavailable``), so a stuck owner row costs one ``lock_timeout``, not two; several
    calls take the plain path, which refuses only the call whose own statement timed out."""
    prepared.settle(connection)  # after a failed prelude: what the session holds
    batch = prepared.Batch(connection)
    planned = _planned([group])
    # A planned call's record check is its record's own insert (``_prelude_first``).
    checks = _checks([group], records=not fresh and planned is None, nowait=False, batch=batch)
    results = _prelude_first([group], connection, checks, lone=True, batch=batch, planned=planned)
    return None if results is None else results[0]


def _run_fresh_batch(
    groups: list[_Group], connection: BaseDatabaseWrapper
) -> list[list[Outcome]] | None:
    """Several users' calls in C + 1 round trips instead of C + 2: ``_run_fresh`` for a
    batch (ADR 0033, amendment). The batch prelude's ``BEGIN``, timeouts and checks go out
    in front of the first user's first statement, with that user's search path; each next
    user's search path with its own first statement (``DeferredSearchPath.switch``, which
    keeps the prelude pending while the users before sent nothing); records, fence guard and
    ``COMMIT`` in one query (``_finish``). The checks (``_checks``) are ``_batch_prelude``'s
    reads turned into statements that fail: every owner row locked ``NOWAIT`` in one
    statement in the batch's order and equal to its user, no user that would run a method
    that is not ``@deletion_safe`` marked for deletion, no call recorded — for a planned
    batch, whose statements are all SQL in this transaction, by the records' insert, which
    fails on a recorded call and rolls everything back (ADR 0039); and, with prepared
    statements on, each next user's lock taken on that user's own search path and the
    tombstone checked last (``_run_planned``'s ``own``, ADR 0040).

    None when the prelude's query failed other than on a lock (a foreign or missing owner,
    a tombstone, a record, a statement ahead of the prelude, the first method's statement):
    rolled back, and ``_run_batch`` runs its plain first attempt, which answers refusals and
    records from ``_batch_prelude``'s rows. Any other failure is raised as the plain first
    attempt's would be — a method raising (every check had passed, or none had run yet), a
    ``NOWAIT`` conflict or a timeout, the records' query, a fatal error — and ``_run_batch``
    handles it the same way: its savepoint rerun, or abandon the batch."""
    prepared.settle(connection)
    batch = prepared.Batch(connection)
    planned = _planned(groups)
    if planned is not None and batch.session is not None:
        # Each user's prepared lock under that user's own search path, the tombstone last
        # (ADR 0040): ``_run_planned`` places them all, behind the bare prelude.
        return _prelude_first(
            groups, connection, [], lone=False, batch=batch, planned=planned, own=True
        )
    checks = _checks(groups, records=planned is None, nowait=True, batch=batch)
    return _prelude_first(groups, connection, checks, lone=False, batch=batch, planned=planned)


def _prelude_first(
    groups: list[_Group],
    connection: BaseDatabaseWrapper,
    then: list[str],
    *,
    lone: bool,
    batch: prepared.Batch,
    planned: _Planned | None,
    own: bool = False,
) -> list[list[Outcome]] | None:
    """``_run_fresh`` and ``_run_fresh_batch``: one transaction whose prelude (``BEGIN``,
    timeouts, ``then``: the checks) goes out in front of the first statement a method sends,
    each next user's search path with that user's first; the records, fence guard and
    ``COMMIT`` in one query (``_finish``, which carries the prelude when no method sent a
    statement). Each user's outcomes, or None: rolled back, the plain path answers.

    What failed decides what happens, and there the two differ (``lone``: one user's calls).
    ``deferred.failed`` is set when the query that carried the prelude failed — a check, or
    the statement riding behind it — even if a method swallowed the error.

    * A planned batch's records' insert met a record (``_Recorded``): None, and the plain
      path answers that call from its record and runs the rest.
    * The prelude rode on the records' query, whose fence guard fails the same way as a
      check (``FenceLost`` with ``failed``): None for both; the plain path's own guard raises
      ``FenceLost`` again if the shard is lost.
    * A lone user answers for itself: a lock or statement timeout in the prelude's query of
      a lone call is refused here (one ``lock_timeout``, not two), a fatal error raised, and
      anything else — a failed check, a method raising — None.
    * A batch leaves every failure but a failed check to ``_run_batch``, as its plain first
      attempt's: raised when past the checks (``failed`` is None: a method raising, the
      records' query), on a lock or statement timeout in the prelude (a ``NOWAIT`` conflict:
      to the savepoint rerun, without a second prelude that would fail the same way) or a
      fatal error; None for a failed check, which the plain first attempt answers."""
    deferred = None
    try:
        with (
            transaction.atomic(using=connection.alias),
            deferred_prelude(
                groups[0].schema, then, connection, timeouts=actor_timeouts()
            ) as deferred,
        ):
            results: list[list[Outcome]] = []
            writes: list[Statement] = []
            if planned is not None and _carried(planned):
                # Every statement carries its own record: the whole batch in one query.
                return _run_carried(groups, planned, connection, batch, own=own)
            if planned is not None:
                # Every call has a statement form: all of them in the prelude's one query.
                # No record check ran ahead of them: a call that has a record fails its
                # record's insert instead, and the whole transaction rolls back.
                results = _run_planned(groups, planned, connection, batch, own=own)
                for group, outcomes in zip(groups, results, strict=True):
                    writes += _record_statements(
                        group, list(zip(group.calls, outcomes, strict=True)), strict=True
                    )
                _finish(writes, connection)
                return results
            for group in groups:
                if results:
                    deferred.switch(group.schema)  # sent with the user's first statement
                outcomes: list[Outcome] = []
                for call in group.calls:
                    outcomes.append(_invoke(call, connection, savepoints=False))
                    if deferred.failed is not None:  # the method swallowed the prelude's error
                        raise _MethodRaised from deferred.failed
                results.append(outcomes)
                recorded = [
                    (call, outcome)
                    for call, outcome in zip(group.calls, outcomes, strict=True)
                    if outcome.recordable
                ]
                writes += _record_statements(group, recorded)
            _finish(writes, connection)
        return results
    except _Recorded:
        if deferred is not None and deferred.failed is not None:
            batch.failed(deferred.failed)  # the record's insert rode in the prelude's query
        return None  # rolled back: the plain path answers the recorded calls from their records
    except Exception as exc:
        failed = deferred.failed if deferred is not None else None
        if failed is not None:
            batch.failed(failed)  # the prelude's query, with any PREPARE in it, failed
        if failed is not None and isinstance(exc, fence.FenceLost):
            return None  # a check or the guard: the plain path's guard tells them apart
        if not lone:
            if failed is None or _timeout_reason(failed) or _fatal(exc, connection):
                raise
            return None
        if _fatal(exc, connection):
            raise
        if failed is not None and len(groups[0].calls) == 1 and _timeout_reason(failed):
            return [_refuse(groups[0], _typed(failed))]  # type: ignore[arg-type]
        return None


_Planned = list[list[tuple[Statement, Any, Call]]]


def _planned(groups: Sequence[_Group]) -> _Planned | None:
    """Each call's statement and answer when every call of a batch has a statement form
    (``kody.actors.base.one_statement``) that plans it; else None, and the methods run one
    by one. A lone call takes it when its statement is a ``Planned`` (its record rides in the
    statement: one round trip, ADR 0042) or with prepared statements on (ADR 0038: its
    records wait for its answer, so what it gains is its schema's prepared statement)."""
    lone = sum(len(group.calls) for group in groups) < 2
    planned: _Planned = []
    for group in groups:
        mine = []
        for call in group.calls:
            try:
                form = statement_form(actor_named(call.actor), call.method)
                if form is None:
                    return None
                plan, answer = form
                statement = plan(*call.args, **call.kwargs)
            except Exception:
                return None  # an unknown actor or bad arguments: the method itself answers
            if statement is None:
                return None
            if lone and not isinstance(statement, Planned) and not prepared.limit():
                return None
            mine.append((statement, answer, call))
        planned.append(mine)
    return planned


def _carried(planned: _Planned) -> bool:
    """Whether every statement of a planned batch can carry its own record (``Planned``,
    ADR 0042 and 0043): then the batch goes out in one query, its ending included."""
    return all(isinstance(statement, Planned) for calls in planned for statement, _, _ in calls)


def _run_planned(
    groups: Sequence[_Group],
    planned: _Planned,
    connection: BaseDatabaseWrapper,
    batch: prepared.Batch,
    *,
    own: bool = False,
) -> list[list[Outcome]]:
    """The planned statements in ONE query behind the deferred prelude (the first user's
    search path is in it, each next user's goes in front of its first statement), then each
    call's answer from its statement's rows. The checks precede every statement in the same
    query, and a failing one stops the rest (``_prelude_first`` answers it the plain way).
    A statement this session has run for the same schema before goes out as the schema's
    prepared statement (``kody.actors.prepared``, ADR 0038).
    An answer that is not given (``Unanswered``, or any error) raises ``_MethodRaised``: the
    transaction rolls back and the methods run themselves.

    ``own`` (ADR 0040): the prelude holds no check. Each user's owner lock goes right after
    that user's search path (the first user's: the prelude's), so its prepared statement runs on
    the path it was planned on (Postgres re-plans a prepared statement whenever
    ``search_path`` differs from its last run's). The tombstone check goes last, once every
    lock is held. A failing lock or tombstone fails the query as the prelude's checks would.
    What these statements decide is made in the order they are sent, so a ``DEALLOCATE``
    that makes room never lands in front of an ``EXECUTE`` of the name it drops."""
    statements, positions = _planned_statements(groups, planned, batch, own=own)
    # The prelude is still pending here: a failure is ``deferred.failed``, which
    # ``_prelude_first`` reports to ``batch`` with the rest.
    rows = in_one_query(connection, statements, rows={p for where in positions for p in where})
    results: list[list[Outcome]] = []
    for calls, where in zip(planned, positions, strict=True):
        outcomes = []
        for (_, answer, call), position in zip(calls, where, strict=True):
            try:
                value = answer(rows[position], *call.args, **call.kwargs)
            except Exception as exc:
                raise _MethodRaised("a planned call was not answered by its rows") from exc
            outcomes.append(Outcome.success(value))
        results.append(outcomes)
    return results


def _planned_statements(
    groups: Sequence[_Group],
    planned: _Planned,
    batch: prepared.Batch,
    *,
    own: bool,
    carried: bool = False,
) -> tuple[list[Statement], list[list[int]]]:
    """What ``_run_planned`` and ``_run_carried`` send behind the prelude, and where each
    call's rows are: every user's search path (the first user's is the prelude's), with
    ``own`` its owner lock, then its statements — ``carried``: each with its record joined
    to it (``_with_record``) — and with ``own`` the tombstone check last."""
    statements: list[Statement] = []
    positions: list[list[int]] = []
    for index, (group, calls) in enumerate(zip(groups, planned, strict=True)):
        if index:
            statements.append(path_statement(group.schema))
        if own:
            lock = owner_lock(group.schema, nowait=True)
            texts = batch.literal(group.schema, lock, [_literal(group.user_id)])
            statements += [(text, ()) for text in texts]
        positions.append([])
        for statement, _, call in calls:
            if carried:
                statement = _with_record(statement, call)
            sent, answering = batch.wrap(group.schema, statement)
            positions[-1].append(len(statements) + answering)
            statements += sent
    if own:
        statements += [(text, ()) for text in _checks(groups, records=False, locks=False)]
    return statements, positions


def _run_carried(
    groups: Sequence[_Group],
    planned: _Planned,
    connection: BaseDatabaseWrapper,
    batch: prepared.Batch,
    *,
    own: bool = False,
) -> list[list[Outcome]]:
    """A planned batch whose every statement is a ``Planned`` in ONE query (ADR 0042 for a
    lone call, ADR 0043 for a batch): the prelude, each user's search path and (``own``)
    owner lock, each call's statement with its record joined to it, the tombstone check,
    the hourly prunes when due, the fence guard and ``COMMIT``.

    A record holds its statement's rows, not an answer: each answer is made from those rows
    once they are back, after the ``COMMIT`` went out with them, and every later answer from
    the record (a redelivery, a retry with the caller's key: ``_recalled``) is made from the
    same rows the same way. A statement with no rows (``Unanswered``) divides by zero, so
    nothing commits and the methods run themselves, the plain way. A call that already has
    a record fails its record's insert (``_Recorded``) and the plain path answers it."""
    statements, positions = _planned_statements(groups, planned, batch, own=own, carried=True)
    for group in groups:
        statements += _record_statements(group, [])  # the prune, when due
    statements += _ending(connection)
    rows = _send_ending(connection, statements, rows={p for where in positions for p in where})
    return [
        [
            _answered(call, answer, rows[position][0][0])
            for (_, answer, call), position in zip(calls, where, strict=True)
        ]
        for calls, where in zip(planned, positions, strict=True)
    ]


# A lone call's record, joined to its statement (``_with_record``): the final query's rows
# as JSON text (``json_agg`` keeps the columns' order, which jsonb would not), inserted as
# the record's outcome when there are any; the statement's answer is the same text, and it
# divides by zero when there is none (``Unanswered``: the method runs itself).
_WITH_RECORD = """WITH {ctes},
    kody_answer AS ({select}),
    kody_rows AS (
        SELECT json_agg(kody_a)::text AS kody_json, count(*) AS kody_n
          FROM kody_answer AS kody_a),
    kody_record AS (
        INSERT INTO actor_calls (id, actor, method, outcome, created_at)
        SELECT %(kody_call)s::text, %(kody_actor)s::text, %(kody_method)s::text,
               jsonb_build_object('ok', true, 'rows', kody_json), now()
          FROM kody_rows WHERE kody_n > 0)
SELECT kody_json, 1 / (kody_n > 0)::int FROM kody_rows"""


@functools.lru_cache(maxsize=64)
def _record_text(ctes: str, select: str) -> str:
    """One form's statement with its record: formatted once, and the same ``str`` object
    every call (its hash, which the prepared-name and placeholder caches take, kept)."""
    return _WITH_RECORD.format(ctes=ctes, select=select)


def _with_record(statement: Planned, call: Call) -> Statement:
    """``statement`` with ``call``'s record in it (ADR 0042): the same text for every call of
    a form, so a schema's prepared statement serves them all; the call's names are values."""
    sql = _record_text(statement.ctes, statement.select)
    values = {"kody_call": call.id, "kody_actor": call.actor, "kody_method": call.method}
    return sql, {**statement.params, **values}


class _Pairs(list):  # type: ignore[type-arg]
    """A JSON object's pairs, in their order (``json.loads``' ``object_pairs_hook``)."""


def _stored_rows(text: str) -> list[tuple]:
    """A statement's rows from ``json_agg``'s text: each row a tuple of its columns' values in
    their order (a row is an object keyed by column name, and names may repeat)."""
    return [
        tuple(_plain(value) for _, value in row)
        for row in json.loads(text, object_pairs_hook=_Pairs)
    ]


def _plain(value: Any) -> Any:
    if isinstance(value, _Pairs):
        return {key: _plain(each) for key, each in value}
    if isinstance(value, list):
        return [_plain(each) for each in value]
    return value


def _answered(call: Call, answer: Any, text: str) -> Outcome:
    """``call``'s outcome from its statement's stored rows (``_run_carried``). Its effect has
    committed: an answer that fails here fails the call (recorded as rows, so every answer
    from the record fails alike) instead of running the method again."""
    try:
        return Outcome.success(answer(_stored_rows(text), *call.args, **call.kwargs))
    except Exception as exc:
        return Outcome.failure(exc)


def _recalled(text: str, call: Call | None) -> Outcome:
    """A call's outcome from its record: the outcome as stored, or for a record of a lone
    planned call (``{"ok": true, "rows": …}``, ADR 0042) the answer its form gives the stored
    rows — what the call was answered when it ran."""
    data = json.loads(text)
    if "rows" not in data:
        return Outcome(text=text, ok=bool(data["ok"]))
    try:
        if call is None:
            raise LookupError("a record of rows without its call")
        form = statement_form(actor_named(call.actor), call.method)
        if form is None:
            raise LookupError(f"{call.actor}.{call.method} has no statement form any more")
    except Exception as exc:
        return Outcome.failure(exc)
    return _answered(call, form[1], data["rows"])


def _checks(
    groups: Sequence[_Group],
    *,
    records: bool,
    nowait: bool = True,
    batch: prepared.Batch | None = None,
    locks: bool = True,
) -> list[str]:
    """The optimistic prelude's checks, as statements that divide by zero instead of rows
    read back (ids written by ``_literal``, as the records are; ``_optimistic``):

    * the owner lock: every user's owner row ``FOR UPDATE`` (``NOWAIT`` for a batch, as in
      ``_batch_prelude``), filtered by the user's id, in ONE statement whose branches run in
      the groups' order (ascending user id) — a missing or foreign owner divides by zero;
      with prepared statements on (``batch``, ADR 0038), one statement per user in that
      order (``owner_lock``), each its schema's own prepared statement once seen twice;
    * ONE statement after the lock (its snapshot is taken with every lock held) that divides
      by zero when any user with a method that is not ``@deletion_safe`` is marked for
      deletion (the tombstone) or, with ``records``, when any call of the groups already has
      a record (ADR 0033): two reads, one statement to parse, plan and answer. A planned
      batch asks no ``records``: its records' insert is the check (ADR 0039).

    ``locks=False``: the tombstone and record check alone, for a planned batch that took
    each user's lock on that user's own search path (ADR 0040)."""
    checks: list[str] = []
    if locks and batch is not None and batch.session is not None:
        # Prepared statements on (ADR 0038): one lock statement per user, in the same order,
        # each its schema's own prepared statement once the session has seen it twice.
        for group in groups:
            checks += batch.literal(
                group.schema, owner_lock(group.schema, nowait=nowait), [_literal(group.user_id)]
            )
    elif locks:
        lock = "FOR UPDATE NOWAIT" if nowait else "FOR UPDATE"
        owners = [
            f"SELECT 1 FROM (SELECT 1 FROM {quoted(group.schema)}.actor_owner"
            f" WHERE id = 1 AND owner_id = {_literal(group.user_id)} {lock}) AS o{index}"
            for index, group in enumerate(groups)
        ]
        checks.append(
            f"SELECT 1 / (count(*) = {len(groups)})::int"
            f" FROM ({' UNION ALL '.join(owners)}) AS owners"
        )
    found: list[str] = []  # reads that must find nothing
    marked = [
        _literal(group.user_id)
        for group in groups
        if not all(_deletion_safe(call) for call in group.calls)
    ]
    if marked:
        found.append(
            f"SELECT 1 FROM {REGISTRY}"
            f" WHERE user_id IN ({', '.join(marked)}) AND deleting_at IS NOT NULL"
        )
    if records:
        found += [
            f"SELECT 1 FROM {quoted(group.schema)}.actor_calls WHERE id IN ({_literals(group)})"
            for group in groups
        ]
    if found:
        checks.append(f"SELECT 1 / (NOT EXISTS ({' UNION ALL '.join(found)}))::int")
    return checks


def owner_lock(schema: str, *, nowait: bool) -> str:
    """One user's owner-lock check as a statement with the owner id as ``$1``: it divides by
    zero unless the owner row is there, names that id, and is locked (``NOWAIT``: or fails)."""
    lock = "FOR UPDATE NOWAIT" if nowait else "FOR UPDATE"
    return (
        f"SELECT 1 / (count(*) = 1)::int FROM (SELECT 1 FROM {quoted(schema)}.actor_owner"
        f" WHERE id = 1 AND owner_id = $1 {lock}) AS o"
    )


def _literals(group: _Group) -> str:
    return ", ".join(_literal(call.id) for call in group.calls)


def _deletion_safe(call: Call) -> bool:
    try:
        return is_deletion_safe(actor_named(call.actor), call.method)
    except Exception:
        return False  # unknown actor or method: _invoke answers it without running anything


def actor_timeouts() -> tuple[int, int]:
    """Every actor transaction's ``lock_timeout`` and ``statement_timeout`` (module docstring)."""
    return settings.KODY_ACTOR_LOCK_TIMEOUT_MS, settings.KODY_ACTOR_STATEMENT_TIMEOUT_MS


def _mismatch(group: _Group) -> OwnerMismatch:
    return OwnerMismatch(f"schema {group.schema} does not belong to the calling user")


def _run_calls(
    group: _Group,
    connection: BaseDatabaseWrapper,
    done: dict[str, Outcome],
    *,
    savepoints: bool,
    restricted: bool,
) -> tuple[list[Outcome], list[Statement]]:
    """One user's calls once its owner lock is held and checked: answers from ``done`` (its
    call records), runs the rest; their outcomes and the statements recording them."""
    fresh: list[tuple[Call, Outcome]] = []
    results: list[Outcome] = []
    for call in group.calls:
        outcome = done.get(call.id)
        if outcome is None:
            outcome = _invoke(call, connection, savepoints=savepoints, restricted=restricted)
            done[call.id] = outcome
            if outcome.recordable:
                fresh.append((call, outcome))
        results.append(outcome)
    return results, _record_statements(group, fresh)


def _batch_prelude(
    groups: Sequence[_Group], connection: BaseDatabaseWrapper
) -> list[tuple[str | None, dict[str, Outcome], bool]]:
    """The first round trip of a batch of several users the plain way (the optimistic
    prelude failed or was not taken), as one query: its ``BEGIN``, the
    timeouts; ONE statement locking every user's owner row, in the batch's order (ascending
    user id; an append plan runs its branches in order); ONE statement reading every user's
    call records for the batch and the registry's tombstones. Per user: the owner id (None
    without an owner row), its recorded outcomes, whether it is marked for deletion.

    The lock takes ``NOWAIT``: an owner row held by anyone else (an inline call inside a
    caller's transaction, ``mark_deleting``, hibernation) fails the statement at once with
    ``lock_not_available``, and the batch reruns the old way, one user at a time behind a
    savepoint, where each lock waits at most ``lock_timeout`` and one stuck user is answered
    alone. Without the wait nothing can deadlock here either. The reads are a separate
    statement after the lock, so their snapshot is taken once every lock is held (a
    ``mark_deleting`` that held one committed before it was granted)."""
    locks: list[str] = []
    reads: list[str] = []
    params: list[Any] = []
    for index, group in enumerate(groups):
        schema = quoted(group.schema)
        locks.append(
            f"SELECT {index} AS i, owner_id::text FROM (SELECT owner_id FROM {schema}.actor_owner"
            " WHERE id = 1 FOR UPDATE NOWAIT) AS o"
        )
        reads.append(
            f"SELECT {index}, id::text, outcome::text FROM {schema}.actor_calls WHERE id = ANY(%s)"
        )
        params.append([call.id for call in group.calls])
    reads.append(
        f"SELECT -1, user_id::text, NULL FROM {REGISTRY}"
        " WHERE user_id = ANY(%s) AND deleting_at IS NOT NULL"
    )
    params.append([group.user_id for group in groups])
    _, owners, records = in_one_query(
        connection,
        [
            set_timeouts(actor_timeouts()),
            ("\nUNION ALL ".join(locks), ()),
            ("\nUNION ALL ".join(reads), params),
        ],
    )
    owner_of: dict[int, str] = dict(owners)
    done: list[dict[str, Outcome]] = [{} for _ in groups]
    marked: set[str] = set()
    for index, key, text in records:
        if index < 0:
            marked.add(key)
        else:
            call = next((each for each in groups[index].calls if each.id == key), None)
            done[index][key] = _recalled(text, call)
    return [
        (owner_of.get(index), done[index], group.user_id in marked)
        for index, group in enumerate(groups)
    ]


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
    # the consumer with the batch still in flight, and every successor would replay it and
    # fall the same way.
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


def _record_statements(
    group: _Group, fresh: list[tuple[Call, Outcome]], *, strict: bool = False
) -> list[Statement]:
    """One multi-row insert of the user's new call records, and now and then the prune; as
    literal SQL, no parameters (``_finish`` sends them without a client-side binding pass).

    ``strict``: the insert fails on a call that already has a record (``unique_violation``,
    which ``_recorded`` recognises) instead of skipping it. A planned batch (ADR 0037) reads
    no records ahead of its statements, so this is its record check: a redelivered call
    rolls the transaction back, and the plain path answers it from its record."""
    table = f"{quoted(group.schema)}.actor_calls"
    statements: list[Statement] = []
    if fresh:
        rows = ", ".join(
            f"({_literal(call.id)}, {_literal(call.actor)}, {_literal(call.method)},"
            f" {_literal(outcome.text)}::jsonb, now())"
            for call, outcome in fresh
        )
        statements.append(
            (
                f"INSERT INTO {table} (id, actor, method, outcome, created_at) VALUES {rows}"
                + ("" if strict else " ON CONFLICT (id) DO NOTHING"),
                (),
            )
        )
    if _prune_clock.due(group.user_id):
        seconds = int(CALL_RECORD_RETENTION.total_seconds())
        statements.append(
            (f"DELETE FROM {table} WHERE created_at < now() - interval '{seconds} seconds'", ())
        )
    return statements


class _Recorded(Exception):
    """A planned call already had a record: its record's insert failed (``strict``)."""


def _recorded(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a call record's insert meeting an existing record: a
    ``unique_violation`` on ``actor_calls`` (whose one unique key is the call id)."""
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    return (
        getattr(cause, "sqlstate", None) == "23505"
        and diag is not None
        and diag.table_name == "actor_calls"
    )


def _literal(text: str) -> str:
    """``text`` as a Postgres string literal: an escape string (``E'...'``), whose meaning
    does not depend on ``standard_conforming_strings``, with backslashes and quotes doubled.
    The connection's encoding is UTF-8 (Django sets it), where no multibyte character holds
    a quote or backslash byte. A NUL cannot be in a text value at all."""
    if "\x00" in text:
        raise ValueError("a string literal cannot hold a NUL character")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


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
