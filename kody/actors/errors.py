"""Errors the actor layer itself raises. A method's own exceptions reach the caller as is."""

from __future__ import annotations

from django.db import DatabaseError

from kody.errors import KodyError


class ActorError(Exception):
    """Base for actor-layer failures (also stands in for a remote type that cannot be imported)."""


class OwnerMismatch(ActorError):
    """The schema a call addressed belongs to another user; nothing ran."""


class UnknownActor(ActorError):
    pass


class UnknownMethod(ActorError):
    pass


class ActorCallTimeout(ActorError, TimeoutError):
    """No reply in time. The call may still run; retry with the same idempotency key."""

    def __init__(self, actor: str, method: str, call_id: str, timeout: float) -> None:
        super().__init__(f"{actor}.{method} gave no reply within {timeout}s (call {call_id})")
        self.actor = actor
        self.method = method
        self.call_id = call_id
        self.timeout = timeout


class ActorUnavailable(KodyError, ActorError):
    """The actor layer cannot take the call now (broker or database unreachable).

    Nothing ran, or the call's outcome is unknown: retry with the same idempotency key.
    Every surface answers it as HTTP 503 with ``Retry-After``.
    """

    code = "actor_unavailable"
    status = 503
    message = "The service is briefly unavailable; retry shortly."
    retry_after_seconds = 5


class LockOrderRefused(ActorError):
    """An inline call inside a caller's ``atomic()`` would take user locks out of the kernel's
    one order (ascending stable id), which could deadlock a shard's batch; nothing ran."""


# SQLSTATEs of the per-transaction limits: lock_not_available, query_canceled.
_TIMEOUTS = {"55P03": "lock_timeout", "57014": "statement_timeout"}


def timeout_reason(exc: BaseException) -> str | None:
    """Which actor-transaction limit a database error hit, if it was one."""
    cause = exc.__cause__ if isinstance(exc, DatabaseError) else None
    return _TIMEOUTS.get(getattr(cause, "sqlstate", None) or "")


def typed_timeout(exc: Exception) -> Exception:
    """A lock or statement timeout reaches the caller as ``ActorUnavailable`` (503, retry
    with the same key), never as a raw database error."""
    reason = timeout_reason(exc)
    if reason is None:
        return exc
    return ActorUnavailable(
        "The call waited too long for the database; retry with the same key.",
        details={"reason": reason},
    )
