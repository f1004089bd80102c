"""Running actor calls: every batch takes one of two paths, in one transaction.

Design note. A shard worker hands ``execute`` every call it drained (an inline call is a
batch of one). Calls are grouped by user, keeping each user's order, and users are taken in
ascending stable id — the one order in which any transaction takes owner-row locks, so two
transactions can never wait on each other's users.

**The one-statement path** (``_one_statement``) is tried first when every call's method
declares its whole effect as one statement (``kody.actors.one_statement``; the meter's
charge). The batch is ONE query and so one round trip: ``BEGIN``, the first user's search
path and the timeouts; one statement locking every owner row and failing unless each names
its user; one failing if a user is being deleted; then per user its search path and each
call's statement with the call's record written by the same statement; the prune when due,
the fence guard and ``COMMIT``. Nothing reads a record first: a call that already has one
fails its record's insert (the call id is the key), so the whole query rolls back. Any
failure there — a foreign owner, a tombstone, a recorded call, a statement that found no
row to answer from (the day's first charge) — rolls everything back and the batch takes the
plain path, which knows how to answer each of those.

**The plain path** (``_plain``) runs any method: a prelude round trip (search path and
timeouts, the same owner-lock statement read back instead of failing, every call's record and
every user's tombstone in one read), then each user's methods through Django's cursor (the
next user's search path rides on its first statement), then one query with every new call
record, the fence guard and ``COMMIT``. A refused user (foreign owner, tombstone) is answered
without running; a recorded call is answered from its record.

The first plain attempt runs without savepoints, which is what makes several users in one
transaction cheap. If anything raises, it is rolled back and run again with a savepoint per
user (and, for a user whose method raised, per call), so a failing call cannot undo its
neighbours. A user that fails in any other way runs on its own after the batch commits
(``_alone``), where a schema that vanished under the process's cache is re-ensured once.

Calls made inside a caller's ``atomic()`` run the plain path behind a savepoint, never
commit, and are refused (``LockOrderRefused``) if they would lock a user below one the
caller's transaction already holds. Every actor transaction sets ``lock_timeout`` and
``statement_timeout``: a call that hits one fails alone with ``ActorUnavailable``
(unrecorded, so a retry with its key runs again).

A user without a schema gets one only if the account directory says the account is live;
while the registry's deletion tombstone is set only ``@deletion_safe`` methods run. A shard
consumer that lost its shard fails the fence guard before ``COMMIT`` (``FenceLost``), and
``execute`` lets that through without answering anyone.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import ProgrammingError

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
    DeferredSearchPath,
    Statement,
    deferred_search_path,
    in_one_query,
    path_statement,
    schema_settings,
    user_schema_scope,
)

log = logging.getLogger("kody.actors")

CALL_RECORD_RETENTION = timedelta(days=1)
PRUNE_EVERY_SECONDS = 3600.0


class _MethodRaised(Exception):
    """A method raised during the savepoint-free attempt; rerun with savepoints."""


class _RunAlone(Exception):
    """This user failed in the batch other than by a method raising: it runs on its own
    after the batch commits."""


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


def execute(calls: Sequence[Call], using: str = DEFAULT_DB_ALIAS) -> list[Outcome]:
    """Run calls and return their outcomes in the same order. Raises only if the database is
    unreachable or the shard was lost (the caller keeps the batch)."""
    groups: dict[tuple[str, str], _Group] = {}
    for index, call in enumerate(calls):
        group = groups.setdefault((call.user_id, call.schema), _Group(call.user_id, call.schema))
        group.indexes.append(index)
        group.calls.append(call)
    ordered = sorted(groups.values(), key=lambda group: group.user_id)
    connection = connections[using]  # looked up once: every level below is handed it
    if connection.in_atomic_block:
        results = [_alone(group, connection) for group in ordered]
    else:
        results = _run(ordered, connection)
    outcomes: list[Outcome | None] = [None] * len(calls)
    for group, group_outcomes in zip(ordered, results, strict=True):
        for index, outcome in zip(group.indexes, group_outcomes, strict=True):
            outcomes[index] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


def _run(groups: list[_Group], connection: BaseDatabaseWrapper) -> list[list[Outcome]]:
    """A batch outside any transaction: the one-statement path if it applies, else (or
    when it failed) the plain path; users left over run alone."""
    results: list[list[Outcome] | None] = [None] * len(groups)
    ready: list[int] = []
    for index, group in enumerate(groups):
        try:
            # Its own transaction when it creates or restores the schema.
            ensure_schema(group.user_id, connection.alias, actors=group.actors)
            ready.append(index)
        except Exception as exc:
            results[index] = _failed(group, exc, connection)
    live = [groups[index] for index in ready]
    if live:
        answered: Sequence[list[Outcome] | None] | None = _one_statement(live, connection)
        if answered is None:
            answered = _plain(live, connection)
        for index, outcomes in zip(ready, answered, strict=True):
            results[index] = outcomes
    return [
        outcomes if outcomes is not None else _alone(group, connection)
        for group, outcomes in zip(groups, results, strict=True)
    ]


# --- the one-statement path -----------------------------------------------------------------


def _one_statement(
    groups: list[_Group], connection: BaseDatabaseWrapper
) -> list[list[Outcome]] | None:
    """Every call of the batch as its declared statement, with its record, in ONE query.
    None when it does not apply or anything failed (rolled back: the plain path answers)."""
    planned = _planned(groups)
    if planned is None:
        return None
    # Each check and call statement runs prepared once its session has seen it twice.
    batch = prepared.Batch(connection)
    statements: list[Statement] = [schema_settings(groups[0].schema, actor_timeouts())]
    for check in _checks(groups):
        statements += batch.wrap(groups[0].schema, (check, ()))
    answers: list[int] = []
    for index, (group, calls) in enumerate(zip(groups, planned, strict=True)):
        if index:
            statements.append(path_statement(group.schema))
        for statement, call in calls:
            statements += batch.wrap(group.schema, _with_record(statement, call))
            answers.append(len(statements) - 1)
        statements += _record_statements(group, [])  # the prune, when due
    try:
        with transaction.atomic(using=connection.alias):
            rows = _send(connection, statements + _ending(connection), rows=set(answers))
    except Exception as exc:
        batch.failed(exc)
        # The fence guard fails the way the checks do (a division by zero), so a "lost
        # fence" here may be a failed check: the plain path's own guard tells them apart.
        if not isinstance(exc, fence.FenceLost) and _fatal(exc, connection):
            raise
        if len(answers) == 1 and _timeout_reason(exc):
            # A lone call that waited out the owner lock: answer now rather than wait twice.
            return [_refuse(groups[0], _typed(exc))]
        return None
    # The reply is the record's outcome, the statement's value in the wire's envelope.
    values = iter(rows[position][0][0] for position in answers)
    return [
        [Outcome(f'{{"ok":true,"value":{next(values)}}}', ok=True) for _ in group.calls]
        for group in groups
    ]


def _planned(groups: Sequence[_Group]) -> list[list[tuple[Planned, Call]]] | None:
    """Each call's statement when every call of the batch has one; else None."""
    planned = []
    for group in groups:
        ids = [call.id for call in group.calls]
        if len(set(ids)) != len(ids):
            return None  # a call pushed twice answers its copy from its outcome: plain path
        if any("\x00" in each for each in [group.user_id, *ids]):
            return None  # not writable as a literal (nor storable as text)
        mine = []
        for call in group.calls:
            try:
                actor = actor_named(call.actor)
                plan = statement_form(actor, method_of(actor, call.method))
                statement = plan(*call.args, **call.kwargs) if plan is not None else None
            except Exception:
                return None  # an unknown actor or bad arguments: the method itself answers
            if statement is None:
                return None
            mine.append((statement, call))
        planned.append(mine)
    return planned


def _checks(groups: Sequence[_Group]) -> list[str]:
    """The plain prelude's reads as statements that fail (divide by zero) instead of being
    read back: the owner locks, and the tombstones of users with a method that is not
    deletion-safe. The tombstone read comes after the locks, so its snapshot is taken with
    every lock held (a ``mark_deleting`` that held one has committed)."""
    checks = [
        f"SELECT 1 / (count(*) FILTER (WHERE mine) = {len(groups)})::int"
        f" FROM ({_owner_locks(groups)}) AS owners"
    ]
    marked = [
        _literal(group.user_id)
        for group in groups
        if not all(_deletion_safe(call) for call in group.calls)
    ]
    if marked:
        checks.append(
            f"SELECT 1 / (NOT EXISTS (SELECT 1 FROM {REGISTRY}"
            f" WHERE user_id IN ({', '.join(marked)}) AND deleting_at IS NOT NULL))::int"
        )
    return checks


# A call's statement with its record written by the same statement: the final query's one
# JSON value is the method's value, stored as the call's outcome when there is one. No row
# divides by zero, so nothing commits and the method runs itself on the plain path.
_WITH_RECORD = """WITH {ctes},
    kody_answer AS ({select}),
    kody_rows AS (
        SELECT min(kody_a.value::text) AS kody_value, count(*) AS kody_n
          FROM kody_answer AS kody_a),
    kody_record AS (
        INSERT INTO actor_calls (id, actor, method, outcome, created_at)
        SELECT %(kody_call)s::text, %(kody_actor)s::text, %(kody_method)s::text,
               jsonb_build_object('ok', true, 'value', kody_value::jsonb), now()
          FROM kody_rows WHERE kody_n = 1)
SELECT kody_value, 1 / (kody_n = 1)::int FROM kody_rows"""


@functools.lru_cache(maxsize=64)
def _record_text(ctes: str, select: str) -> str:
    # Formatted once per form: the same text every call, which psycopg parses once.
    return _WITH_RECORD.format(ctes=ctes, select=select)


def _with_record(statement: Planned, call: Call) -> Statement:
    values = {"kody_call": call.id, "kody_actor": call.actor, "kody_method": call.method}
    return _record_text(statement.ctes, statement.select), {**statement.params, **values}


# --- the plain path -------------------------------------------------------------------------


def _plain(groups: list[_Group], connection: BaseDatabaseWrapper) -> list[list[Outcome] | None]:
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
                    results[running] = _refuse(group, _mismatch(group))
                    continue
                if running and path is not None:
                    path.switch(group.schema)  # sent with the user's first statement
                results[running], pending = _run_calls(group, connection, check, savepoints=False)
                writes += pending
            running = None  # past the users: a failure now is the records', fence's or COMMIT's
            _finish(writes, connection)
        return results
    except Exception as exc:
        if _fatal(exc, connection):
            raise
        results = [None] * len(groups)
        stuck = running if running is not None else (0 if len(groups) == 1 else None)
        if stuck is not None and _timeout_reason(exc):
            # Waited out a lock (or a statement ran too long) outside any method: answer that
            # user now rather than wait again in the rerun.
            results[stuck] = _refuse(groups[stuck], _typed(exc))
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
            _finish(writes, connection)
    except Exception as exc:  # the rerun's COMMIT itself failed: every user on its own
        if _fatal(exc, connection):
            raise
        log.exception("batch transaction failed; running its users one by one")
        for index in rerun:
            results[index] = None
    return results


def _guarded(
    group: _Group, connection: BaseDatabaseWrapper
) -> tuple[list[Outcome], list[Statement]]:
    """One user inside the batch's rerun, behind its own savepoint: its outcomes and its
    record writes (sent with the batch's fence guard)."""
    for savepoints in (False, True):
        try:
            with transaction.atomic(using=connection.alias):
                return _in_scope(group, connection, savepoints=savepoints)
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


def _alone(group: _Group, connection: BaseDatabaseWrapper) -> list[Outcome]:
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
                    _finish(writes, connection)
                    return outcomes
            except _MethodRaised:
                savepoints = True
            except ProgrammingError:
                # The schema went away under the process's cache (hibernated or purged
                # elsewhere): ensure it once more, which restores or refuses.
                if reensured or not _usable(connection):
                    raise
                known.forget(group.user_id)
                ensure_schema(group.user_id, connection.alias, actors=group.actors)
                savepoints, reensured = True, True
    except Exception as exc:
        return _failed(group, exc, connection)


def _in_scope(
    group: _Group, connection: BaseDatabaseWrapper, *, savepoints: bool
) -> tuple[list[Outcome], list[Statement]]:
    """One user's calls inside an open transaction or savepoint that the caller ends."""
    with _prelude([group], connection) as (checked, _):
        check = checked[0]
        if not check.mine:
            raise _mismatch(group)
        return _run_calls(group, connection, check, savepoints=savepoints)


@dataclass
class _Check:
    mine: bool  # the owner row is there, names the user, and is locked
    done: dict[str, Outcome]  # the calls that already have a record: their outcome
    restricted: bool  # marked for deletion: only deletion-safe methods run


@contextmanager
def _prelude(
    groups: Sequence[_Group], connection: BaseDatabaseWrapper
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
    then = [(_owner_locks(groups), ()), ("\nUNION ALL ".join(reads), params)]
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


def _owner_locks(groups: Sequence[_Group]) -> str:
    """THE owner-lock statement, in both paths: each user's owner row ``FOR UPDATE`` in the
    users' order (an append runs its branches in order), with whether it names the user.
    Several users take ``NOWAIT``: a held row fails it at once instead of waiting in a
    transaction that already holds other users' rows."""
    lock = "FOR UPDATE NOWAIT" if len(groups) > 1 else "FOR UPDATE"
    return " UNION ALL ".join(
        f"SELECT {index} AS i, mine FROM (SELECT owner_id = {_literal(group.user_id)} AS mine"
        f" FROM {quoted(group.schema)}.actor_owner WHERE id = 1 {lock}) AS o{index}"
        for index, group in enumerate(groups)
    )


def _run_calls(
    group: _Group, connection: BaseDatabaseWrapper, check: _Check, *, savepoints: bool
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
    return results, _record_statements(group, fresh)


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


# --- the end of a transaction, shared by both paths -----------------------------------------


def _finish(writes: list[Statement], connection: BaseDatabaseWrapper) -> None:
    """Every user's call records, the fence guard and — for the outermost transaction — its
    ``COMMIT``, in one round trip. A failure anywhere (the guard's when the shard was lost)
    stops the statements after it, so the COMMIT never runs and ``atomic()`` rolls back as
    usual. When it succeeds Postgres has committed: the block's own COMMIT finds nothing to
    do (psycopg sends nothing when idle) and on-commit hooks run as usual."""
    statements = _merged(writes) + _ending(connection)
    if statements:
        _send(connection, statements, rows=False)


def _ending(connection: BaseDatabaseWrapper) -> list[Statement]:
    statements: list[Statement] = []
    guard = fence.guard()
    if guard is not None:
        statements.append(guard)
    if len(connection.atomic_blocks) == 1 and not connection.needs_rollback:
        statements.append(("COMMIT", ()))
    return statements


def _send(
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


def _merged(writes: list[Statement]) -> list[Statement]:
    """Several users' record writes as ONE statement (data-modifying CTEs, each run to
    completion whether or not anything reads it): parsed, planned and started once."""
    if len(writes) < 2:
        return list(writes)
    ctes = ", ".join(f"w{index} AS ({sql})" for index, (sql, _) in enumerate(writes))
    return [(f"WITH {ctes} SELECT 1", [param for _, each in writes for param in each])]


def _record_statements(group: _Group, fresh: list[tuple[Call, Outcome]]) -> list[Statement]:
    """One multi-row insert of the user's new call records, and now and then the prune; as
    literal SQL (schema-qualified, so they can go out after other users' calls)."""
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


def _literal(text: str) -> str:
    """``text`` as a Postgres string literal: an escape string (``E'...'``), whose meaning
    does not depend on ``standard_conforming_strings``, with backslashes and quotes doubled.
    The connection's encoding is UTF-8 (Django sets it), where no multibyte character holds
    a quote or backslash byte. A NUL cannot be in a text value at all. Literals spare the
    records a client-side binding pass, and the text never holds a ``%`` placeholder."""
    if "\x00" in text:
        raise ValueError("a string literal cannot hold a NUL character")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


# --- answers and failures -------------------------------------------------------------------


def _refuse(group: _Group, exc: Exception) -> list[Outcome]:
    log.warning("refused %d call(s) for %s: %s", len(group.calls), group.schema, exc)
    return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def _failed(group: _Group, exc: Exception, connection: BaseDatabaseWrapper) -> list[Outcome]:
    """A user's calls when its transaction failed outside any method: refused (nothing ran),
    or raised when the whole batch must stop."""
    if isinstance(exc, _REFUSED):
        return _refuse(group, exc)
    if _fatal(exc, connection):
        raise exc
    if _timeout_reason(exc):
        return _refuse(group, _typed(exc))
    log.exception("actor calls for %s failed", group.schema, exc_info=exc)
    return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def _fatal(exc: Exception, connection: BaseDatabaseWrapper) -> bool:
    """Errors that abandon the whole batch: the shard was lost, or the database is gone."""
    if isinstance(exc, fence.FenceLost):
        return True
    return isinstance(exc, DatabaseError) and not _usable(connection)


def _usable(connection: BaseDatabaseWrapper) -> bool:
    return connection.connection is not None and connection.is_usable()


def _mismatch(group: _Group) -> OwnerMismatch:
    return OwnerMismatch(f"schema {group.schema} does not belong to the calling user")


def _deletion_safe(call: Call) -> bool:
    try:
        return is_deletion_safe(actor_named(call.actor), call.method)
    except Exception:
        return False  # unknown actor or method: the plain path answers it, running nothing


def actor_timeouts() -> tuple[int, int]:
    """Every actor transaction's ``lock_timeout`` and ``statement_timeout`` (milliseconds)."""
    return settings.KODY_ACTOR_LOCK_TIMEOUT_MS, settings.KODY_ACTOR_STATEMENT_TIMEOUT_MS


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
