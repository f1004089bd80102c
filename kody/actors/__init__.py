"""Actors: per-user single writers over per-user schemas (see kody/actors/base.py)."""

from kody.actors.base import Actor, CallContext
from kody.actors.errors import (
    ActorCallTimeout,
    ActorError,
    OwnerMismatch,
    UnknownActor,
    UnknownMethod,
)

__all__ = [
    "Actor",
    "ActorCallTimeout",
    "ActorError",
    "CallContext",
    "OwnerMismatch",
    "UnknownActor",
    "UnknownMethod",
]
