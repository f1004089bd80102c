"""Errors the actor layer itself raises. A method's own exceptions reach the caller as is."""

from __future__ import annotations


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
