"""The kernel's seam to the accounts app: who the caller is, may they act, where audit rows go.

The kernel never imports ``apps.*``. What it needs from an accounts implementation is three
settings, each a dotted path resolved with ``import_string`` (as django-tenants resolves its
tenant model) and checked against a small Protocol:

* ``KODY_BEARER_BACKEND`` — turns a presented bearer secret (or a token id seen moments ago)
  into a live :class:`Token`, or ``None``;
* ``KODY_ACCOUNT_POLICY`` — the one answer to "is this account being deleted?" that every
  surface (API, MCP, account UI, the kernel's actors) asks;
* ``KODY_AUDIT_SINK`` — a callable that records one security audit row.
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string


class Principal(Protocol):
    """The user a token acts for, as the kernel sees them."""

    pk: Any
    email: str
    is_staff: bool

    @property
    def stable_user_id(self) -> str: ...


class Token(Protocol):
    pk: Any
    token_prefix: str
    scopes: list[str]
    expires_at: Any
    # The resources (RFC 8707) an OAuth token was issued for; None: valid on every surface.
    audience: list[str] | None

    @property
    def user(self) -> Any: ...

    @property
    def is_active(self) -> bool: ...

    @property
    def principal_id(self) -> str: ...

    def allows(self, scope: str) -> bool: ...


@runtime_checkable
class BearerBackend(Protocol):
    def authenticate_bearer(self, raw: str | None) -> Token | None: ...

    def token_by_id(self, token_id: int) -> Token | None: ...

    def note_mcp_use(self, token: Token) -> None:
        """A token was just accepted at ``/mcp`` (first-connection signals, grant last use)."""
        ...


@runtime_checkable
class AccountPolicy(Protocol):
    def is_deleting(self, user: Any) -> bool:
        """True once the account's deletion has started (read fresh, not from a cached row)."""
        ...

    def may_act(self, user: Any) -> bool:
        """True while the account may sign in or call anything at all (not suspended/deleting)."""
        ...

    def write_guard(self, user: Any, holder: str) -> AbstractContextManager[None]:
        """Hold an account write lease around one guarded mutation; raises ``AccountDeleting``
        once deletion has started (seed 002's acquire → write → release)."""
        ...


class AuditSink(Protocol):
    def __call__(
        self,
        *,
        category: str,
        action: str,
        result: str,
        email: str | None = None,
        ip: str | None = None,
        client_id: str | None = None,
        path: str | None = None,
        reason: str | None = None,
    ) -> None: ...


@functools.cache
def _load(setting: str, dotted: str) -> Any:
    try:
        return import_string(dotted)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}={dotted!r} cannot be imported: {exc}") from exc


def _resolve(setting: str) -> Any:
    dotted = getattr(settings, setting, None)
    if not dotted:
        raise ImproperlyConfigured(f"{setting} must name the accounts implementation")
    return _load(setting, dotted)


def bearer_backend() -> BearerBackend:
    backend = _resolve("KODY_BEARER_BACKEND")
    if not isinstance(backend, BearerBackend):
        raise ImproperlyConfigured("KODY_BEARER_BACKEND does not implement BearerBackend")
    return backend


def account_policy() -> AccountPolicy:
    policy = _resolve("KODY_ACCOUNT_POLICY")
    if not isinstance(policy, AccountPolicy):
        raise ImproperlyConfigured("KODY_ACCOUNT_POLICY does not implement AccountPolicy")
    return policy


def audit_sink() -> AuditSink:
    sink = _resolve("KODY_AUDIT_SINK")
    if not callable(sink):
        raise ImproperlyConfigured("KODY_AUDIT_SINK must be callable")
    return sink  # type: ignore[no-any-return]
