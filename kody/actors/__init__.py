"""Actors: per-user single writers over per-user schemas (see kody/actors/base.py)."""

from kody.actors.base import (
    Actor,
    CallContext,
    Planned,
    deletion_safe,
    is_deletion_safe,
    is_read,
    one_statement,
    reads,
)
from kody.actors.errors import (
    ActorCallTimeout,
    ActorError,
    ActorUnavailable,
    LockOrderRefused,
    OwnerMismatch,
    UnknownActor,
    UnknownMethod,
)

__all__ = [
    "Actor",
    "ActorCallTimeout",
    "ActorError",
    "ActorUnavailable",
    "CallContext",
    "LockOrderRefused",
    "OwnerMismatch",
    "Planned",
    "UnknownActor",
    "UnknownMethod",
    "deletion_safe",
    "is_deletion_safe",
    "is_read",
    "one_statement",
    "reads",
]
