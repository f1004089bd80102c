"""What a batch is and how its users are answered, shared by both paths of the runtime.

A batch's calls are grouped by user (``Group``); both paths lock the users' owner rows with
the one statement built here (``owner_locks``); kernel SQL writes ids as literals
(``literal``); and a user whose transaction failed outside any method is refused, failed,
or stops the whole batch (``failed``, ``fatal``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from kody.actors import fence
from kody.actors.base import actor_named, is_deletion_safe
from kody.actors.errors import LockOrderRefused, OwnerMismatch
from kody.actors.errors import timeout_reason as _timeout_reason
from kody.actors.errors import typed_timeout as _typed
from kody.actors.wire import Call, Outcome
from kody.errors import AccountDeleting
from kody.userschema.accounts import NoLiveAccount
from kody.userschema.naming import quoted

log = logging.getLogger("kody.actors")

# Refusals of a whole user's calls: nothing ran, nothing to record.
REFUSED = (OwnerMismatch, AccountDeleting, NoLiveAccount, LockOrderRefused)


@dataclass
class Group:
    """One user's calls in a batch, in their order, with their positions in the batch."""

    user_id: str
    schema: str
    indexes: list[int] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    @property
    def actors(self) -> set[str]:
        # Their table sets are created on their first call (kody.userschema.tablesets).
        return {call.actor for call in self.calls}


def owner_locks(groups: Sequence[Group]) -> str:
    """THE owner-lock statement, in both paths: each user's owner row ``FOR UPDATE`` in the
    users' order (an append runs its branches in order), with whether it names the user.
    Several users take ``NOWAIT``: a held row fails it at once instead of waiting in a
    transaction that already holds other users' rows."""
    lock = "FOR UPDATE NOWAIT" if len(groups) > 1 else "FOR UPDATE"
    return " UNION ALL ".join(
        f"SELECT {index} AS i, mine FROM (SELECT owner_id = {literal(group.user_id)} AS mine"
        f" FROM {quoted(group.schema)}.actor_owner WHERE id = 1 {lock}) AS o{index}"
        for index, group in enumerate(groups)
    )


def literal(text: str) -> str:
    """``text`` as a Postgres string literal: an escape string (``E'...'``), whose meaning
    does not depend on ``standard_conforming_strings``, with backslashes and quotes doubled.
    The connection's encoding is UTF-8 (Django sets it), where no multibyte character holds
    a quote or backslash byte. A NUL cannot be in a text value at all. Literals spare the
    records a client-side binding pass, and the text never holds a ``%`` placeholder."""
    if "\x00" in text:
        raise ValueError("a string literal cannot hold a NUL character")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def refuse(group: Group, exc: Exception) -> list[Outcome]:
    log.warning("refused %d call(s) for %s: %s", len(group.calls), group.schema, exc)
    return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def failed(group: Group, exc: Exception, connection: BaseDatabaseWrapper) -> list[Outcome]:
    """A user's calls when its transaction failed outside any method: refused (nothing ran),
    or raised when the whole batch must stop."""
    if isinstance(exc, REFUSED):
        return refuse(group, exc)
    if fatal(exc, connection):
        raise exc
    if _timeout_reason(exc):
        return refuse(group, _typed(exc))
    log.exception("actor calls for %s failed", group.schema, exc_info=exc)
    return [Outcome.failure(exc, recordable=False)] * len(group.calls)


def fatal(exc: Exception, connection: BaseDatabaseWrapper) -> bool:
    """Errors that abandon the whole batch: the shard was lost, or the database is gone."""
    if isinstance(exc, fence.FenceLost):
        return True
    return isinstance(exc, DatabaseError) and not usable(connection)


def usable(connection: BaseDatabaseWrapper) -> bool:
    return connection.connection is not None and connection.is_usable()


def mismatch(group: Group) -> OwnerMismatch:
    return OwnerMismatch(f"schema {group.schema} does not belong to the calling user")


def deletion_safe_call(call: Call) -> bool:
    try:
        return is_deletion_safe(actor_named(call.actor), call.method)
    except Exception:
        return False  # unknown actor or method: the plain path answers it, running nothing


def actor_timeouts() -> tuple[int, int]:
    """Every actor transaction's ``lock_timeout`` and ``statement_timeout`` (milliseconds)."""
    return settings.KODY_ACTOR_LOCK_TIMEOUT_MS, settings.KODY_ACTOR_STATEMENT_TIMEOUT_MS
