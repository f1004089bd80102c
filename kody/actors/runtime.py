"""Running actor calls: every batch takes one of two paths, in one transaction.

Design note. A shard worker hands ``execute`` every call it drained (an inline call is a
batch of one). Calls are grouped by user, keeping each user's order, and users are taken in
ascending stable id — the one order in which any transaction takes owner-row locks, so two
transactions can never wait on each other's users.

The two paths, each in a module of its own:

* **The one-statement path** (``one_statement`` in ``kody.actors.one_statement_path``) is
  tried first when every call's method declares its whole effect as one statement
  (``kody.actors.one_statement``; the meter's charge): the whole batch is ONE query, and so
  one round trip. Any failure there rolls everything back and the batch takes the plain path.
* **The plain path** (``plain`` in ``kody.actors.plain_path``) runs any method: a prelude
  round trip, the methods through Django's cursor, and one query with the new call records,
  the fence guard and ``COMMIT``. A user that fails in the batch other than by a method
  raising runs on its own after the batch commits (``alone``, same module).

Both share what a batch is and how its users are answered (``kody.actors.batch``: the
owner-lock statement, refusals and failures) and how a transaction ends
(``kody.actors.records``: the call records, their prune, the fence guard and ``COMMIT`` in
one round trip).

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

from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from kody.actors.batch import Group, failed
from kody.actors.one_statement_path import one_statement
from kody.actors.plain_path import alone, plain
from kody.actors.wire import Call, Outcome
from kody.userschema.schemas import ensure_schema


def execute(calls: Sequence[Call], using: str = DEFAULT_DB_ALIAS) -> list[Outcome]:
    """Run calls and return their outcomes in the same order. Raises only if the database is
    unreachable or the shard was lost (the caller keeps the batch)."""
    groups: dict[tuple[str, str], Group] = {}
    for index, call in enumerate(calls):
        group = groups.setdefault((call.user_id, call.schema), Group(call.user_id, call.schema))
        group.indexes.append(index)
        group.calls.append(call)
    ordered = sorted(groups.values(), key=lambda group: group.user_id)
    connection = connections[using]  # looked up once: every level below is handed it
    if connection.in_atomic_block:
        results = [alone(group, connection) for group in ordered]
    else:
        results = _run(ordered, connection)
    outcomes: list[Outcome | None] = [None] * len(calls)
    for group, group_outcomes in zip(ordered, results, strict=True):
        for index, outcome in zip(group.indexes, group_outcomes, strict=True):
            outcomes[index] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


def _run(groups: list[Group], connection: BaseDatabaseWrapper) -> list[list[Outcome]]:
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
            results[index] = failed(group, exc, connection)
    live = [groups[index] for index in ready]
    if live:
        answered: Sequence[list[Outcome] | None] | None = one_statement(live, connection)
        if answered is None:
            answered = plain(live, connection)
        for index, outcomes in zip(ready, answered, strict=True):
            results[index] = outcomes
    return [
        outcomes if outcomes is not None else alone(group, connection)
        for group, outcomes in zip(groups, results, strict=True)
    ]
