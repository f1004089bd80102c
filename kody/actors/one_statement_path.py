"""The one-statement path: a batch whose every call declares its whole effect as one
statement, run as ONE query and so one round trip.

The query is ``BEGIN``, the first user's search path and the timeouts; one statement locking
every owner row and failing unless each names its user; one failing if a user is being
deleted; then per user its search path and each call's statement with the call's record
written by the same statement; the prune when due, the fence guard and ``COMMIT``. Nothing
reads a record first: a call that already has one fails its record's insert (the call id is
the key), so the whole query rolls back. Any failure there — a foreign owner, a tombstone, a
recorded call, a statement that found no row to answer from (the day's first charge) — rolls
everything back and the batch takes the plain path (``kody.actors.plain_path``), which knows
how to answer each of those.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from kody.actors import fence, prepared
from kody.actors.base import Planned, actor_named, method_of, statement_form
from kody.actors.batch import (
    Group,
    actor_timeouts,
    deletion_safe_call,
    fatal,
    literal,
    owner_locks,
    refuse,
)
from kody.actors.errors import timeout_reason as _timeout_reason
from kody.actors.errors import typed_timeout as _typed
from kody.actors.records import ending, record_statements, send
from kody.actors.wire import Call, Outcome
from kody.userschema.schemas import REGISTRY
from kody.userschema.scope import Statement, path_statement, schema_settings


def one_statement(
    groups: list[Group], connection: BaseDatabaseWrapper
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
        statements += record_statements(group, [])  # the prune, when due
    try:
        with transaction.atomic(using=connection.alias):
            rows = send(connection, statements + ending(connection), rows=set(answers))
    except Exception as exc:
        batch.failed(exc)
        # The fence guard fails the way the checks do (a division by zero), so a "lost
        # fence" here may be a failed check: the plain path's own guard tells them apart.
        if not isinstance(exc, fence.FenceLost) and fatal(exc, connection):
            raise
        if len(answers) == 1 and _timeout_reason(exc):
            # A lone call that waited out the owner lock: answer now rather than wait twice.
            return [refuse(groups[0], _typed(exc))]
        return None
    # The reply is the record's outcome, the statement's value in the wire's envelope.
    values = iter(rows[position][0][0] for position in answers)
    return [
        [Outcome(f'{{"ok":true,"value":{next(values)}}}', ok=True) for _ in group.calls]
        for group in groups
    ]


def _planned(groups: Sequence[Group]) -> list[list[tuple[Planned, Call]]] | None:
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


def _checks(groups: Sequence[Group]) -> list[str]:
    """The plain prelude's reads as statements that fail (divide by zero) instead of being
    read back: the owner locks, and the tombstones of users with a method that is not
    deletion-safe. The tombstone read comes after the locks, so its snapshot is taken with
    every lock held (a ``mark_deleting`` that held one has committed)."""
    checks = [
        f"SELECT 1 / (count(*) FILTER (WHERE mine) = {len(groups)})::int"
        f" FROM ({owner_locks(groups)}) AS owners"
    ]
    marked = [
        literal(group.user_id)
        for group in groups
        if not all(deletion_safe_call(call) for call in group.calls)
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
