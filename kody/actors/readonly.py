"""Reads beside the writer: how a ``@reads`` method runs, so a read never queues behind writes.

An actor is its user's single *writer*; nothing requires its reads to wait in the writer's
queue. A method marked ``@reads`` runs on the caller's own connection:

* outside a transaction, as one ``REPEATABLE READ, READ ONLY`` transaction: a snapshot of
  everything committed when its first statement ran — every write its caller made with
  ``call`` included (the writer answers after its COMMIT), casts still queued not;
* inside a caller's ``atomic()``, behind a savepoint that is always rolled back, with
  ``transaction_read_only`` on (the rollback undoes it, the search path and the timeouts):
  it sees the caller's own uncommitted writes, as an inline call would.

Either way the prelude is one round trip (search path, the actor timeouts, the owner row and
the registry's deletion tombstone read together), there is no owner-row lock, no call record
and no COMMIT of anything, so a read costs the writer nothing and waits for no queue. What
the kernel guarantees a write still holds: a read addressed to another user's schema is
refused (``OwnerMismatch``), one for an account marked for deletion is refused unless it is
``@deletion_safe``, and a schema hibernated or purged under the process' cache is found
again once. A write inside a ``@reads`` method fails (the transaction is read-only);
housekeeping a read finds to do (an opportunistic prune) is asked for with
``Actor.follow_up`` and cast to the writer after the read ends.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.utils import ProgrammingError

from kody.actors.base import CallContext, actor_named, is_deletion_safe, method_of
from kody.actors.batch import actor_timeouts
from kody.actors.errors import OwnerMismatch, typed_timeout
from kody.actors.wire import Call, Outcome
from kody.errors import AccountDeleting
from kody.userschema.accounts import NoLiveAccount
from kody.userschema.schemas import REGISTRY, ensure_schema, known
from kody.userschema.scope import in_one_query, schema_settings

FollowUps = list[tuple[str, dict[str, Any]]]

# Refusals: nothing ran.
_REFUSED = (OwnerMismatch, AccountDeleting, NoLiveAccount)


def execute_read(call: Call, using: str = DEFAULT_DB_ALIAS) -> tuple[Outcome, FollowUps]:
    """Run one ``@reads`` call here and now: its outcome, and the housekeeping it asked for
    (to be cast once the read has ended). Raises only if the database is unreachable."""
    try:
        actor = actor_named(call.actor)
        method = method_of(actor, call.method)
    except Exception as exc:  # unknown actor or method: nothing ran
        return Outcome.failure(exc, recordable=False), []
    context = CallContext(call.user_id, call.schema, call.id, using, read_only=True)
    try:
        for attempt in (1, 2):
            try:
                ensure_schema(call.user_id, using, actors={call.actor})
                return _in_snapshot(actor, method, call, context, using), context.follow_ups
            except _SchemaGone:
                if attempt == 2:
                    raise
                # Hibernated or purged under this process' cache: look again, once.
                known.forget(call.user_id)
                context.follow_ups.clear()
    except _REFUSED as exc:
        return Outcome.failure(exc, recordable=False), []
    except _SchemaGone as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        return Outcome.failure(typed_timeout(cause), recordable=False), []
    except DatabaseError as exc:
        connection = connections[using]
        if connection.connection is None or not connection.is_usable():
            raise
        return Outcome.failure(typed_timeout(exc), recordable=False), []
    raise AssertionError("unreachable")


class _SchemaGone(Exception):
    """No schema (or no table) where the cache said one was: hibernation or a purge dropped
    it. Without the owner lock a read can also meet hibernation's ``DROP`` halfway (it waits
    for the read's table locks while holding others the read then asks for): a deadlock,
    which Postgres breaks by failing one of the two. Either way the read looks again."""


# SQLSTATEs of those races: undefined_table, invalid_schema_name, deadlock_detected.
_SCHEMA_RACES = {"42P01", "3F000", "40P01"}


def _in_snapshot(actor: type, method: str, call: Call, context: CallContext, using: str) -> Outcome:
    connection = connections[using]
    nested = connection.in_atomic_block
    # Inside a shard batch, a search path switch still pending (``deferred_search_path``)
    # goes out with the savepoint's own statement, before it: the rollback cannot undo it.
    with transaction.atomic(using=using):
        try:
            _prelude(connection, actor, call, nested=nested)
            bound = getattr(actor(context), method)
            try:
                return Outcome.success(bound(*call.args, **call.kwargs))
            except DatabaseError as exc:
                if getattr(exc.__cause__, "sqlstate", None) in _SCHEMA_RACES:
                    raise _SchemaGone from exc
                # A write (read_only_sql_transaction) is a bug in the method: its error as is.
                return Outcome.failure(typed_timeout(exc), recordable=False)
            except Exception as exc:
                return Outcome.failure(exc, recordable=False)
        finally:
            # A read keeps nothing: roll back, whatever happened. Nested, the savepoint's
            # rollback also undoes transaction_read_only, the search path and the timeouts.
            transaction.set_rollback(True, using=using)


def _prelude(connection: Any, actor: type, call: Call, *, nested: bool) -> None:
    """One round trip: read-only (and, on its own, REPEATABLE READ), the search path and the
    actor timeouts, then the owner row and the tombstone, both checked."""
    first = (
        "SELECT set_config('transaction_read_only', 'on', true)"
        if nested
        else "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
    )
    checks = (
        "SELECT (SELECT owner_id FROM actor_owner WHERE id = 1), EXISTS (SELECT 1"
        f" FROM {REGISTRY} WHERE user_id = %s AND deleting_at IS NOT NULL)"
    )
    try:
        *_, rows = in_one_query(
            connection,
            [
                (first, ()),
                schema_settings(call.schema, actor_timeouts()),
                (checks, [call.user_id]),
            ],
        )
    except ProgrammingError as exc:
        raise _SchemaGone from exc
    owner, deleting = rows[0]
    if owner != call.user_id:
        raise OwnerMismatch(f"schema {call.schema} does not belong to the calling user")
    if deleting and not is_deletion_safe(actor, call.method):
        raise AccountDeleting(details={"actor": call.actor, "method": call.method})
