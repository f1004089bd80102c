"""Mail for the operator's reserved system addresses: who takes it, registered from above.

Routing (``services.routing``) knows which locals are the system's; what happens to their
mail belongs to ``apps.system_email``, which is built on this app (it reuses the MIME parser,
the blob store and the delivery outcome types). So system email registers its handler here
when it loads, and the Mailbox never imports it: the two apps depend in one direction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class SystemMail:
    # (raw, base local, delivery id, envelope from) -> the inbound service's Outcome
    deliver: Callable[[bytes, str, str, str | None], Any]
    # Content-free counts for the operator's mail status, given the system blobs' prefix.
    status: Callable[[str], dict[str, Any]]


_registered: list[SystemMail] = []


def register(handler: SystemMail) -> None:
    """Name the one taker of system-address mail (system email does, in its ``ready()``)."""
    _registered[:] = [handler]


def handler() -> SystemMail:
    if not _registered:
        raise ImproperlyConfigured("no system mail handler registered (is system_email installed?)")
    return _registered[0]
