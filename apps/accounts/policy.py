"""May this account act? The one policy every surface asks (API, MCP, account UI, admin, kernel).

``settings.KODY_ACCOUNT_POLICY`` names :class:`AccountPolicy`, so the kernel reaches these
answers without importing this app. Two questions, one function each:

* ``is_deleting(user)``: deletion has started; every mutation is refused (409 ``account_deleting``).
  Read fresh from the row: the fence may have been set after this caller authenticated.
* ``may_act(user)``: the account may sign in, use a token or reset its password at all —
  active, not suspended, not being deleted.
* ``may_sign_in(user)``: an existing session may continue — active and not suspended.
* ``write_guard(user, holder)``: hold an account write lease in the user's UserMeter around
  one guarded mutation (seed 002), so a deletion that has marked the account waits for it and
  nothing is written after the drain. Nested guards for the same user share the outer lease.

The leases live in the UserMeter, which belongs to entitlements, an app built on this one.
So entitlements registers its lease keeper here when it loads (``register_write_leases``)
and this module never imports it: accounts stays below every app that reads accounts.

* ``count_limit(user, resource)``: the plan's count limit for ``resource`` held atomically
  around an insert (entitlements' ``count_limit``, registered the same way), so an app below
  entitlements (packages) enforces jobs, secrets, packages and repos without importing it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from apps.accounts.models import User
from kody.errors import AccountDeleting, Conflict

log = logging.getLogger(__name__)

# user stable id -> the lease token this context already holds (nested guards reuse it).
_held: ContextVar[dict[str, str] | None] = ContextVar("kody_write_leases", default=None)


class WriteLeases(Protocol):
    """What keeps the account write leases (entitlements' ``metering``)."""

    def acquire_write_lease(self, uid: str, token: str, holder: str, at: str) -> Any:
        """Take a lease, or raise ``AccountDeleting`` once the account's tombstone is set."""

    def release_write_lease(self, uid: str, token: str) -> Any:
        """Answer ``{"released": bool}``: False when the lease was gone."""


_leases: list[WriteLeases] = []


def register_write_leases(keeper: WriteLeases) -> None:
    """Name the one keeper of write leases (entitlements does, in its ``ready()``)."""
    _leases[:] = [keeper]


_count_limits: list[Any] = []


def register_count_limits(count_limit: Any) -> None:
    """Name the one keeper of plan count limits (entitlements does, in its ``ready()``)."""
    _count_limits[:] = [count_limit]


def count_limit(user: Any, resource: str) -> Any:
    """``with count_limit(user, "secrets") as slot: slot.take(n); ...insert...`` — the
    registered keeper's context manager (entitlements' ``count_limit``)."""
    if not _count_limits:
        raise ImproperlyConfigured("no count-limit keeper registered (is entitlements installed?)")
    return _count_limits[0](user, resource)


_first_mcp_use: list[Any] = []


def register_first_mcp_client_use(settle: Any) -> None:
    """Name what settles a person's first use of an MCP client (entitlements: the
    second-agent gift), called as ``settle(user_pk, now=...)`` and returning True when it
    granted something."""
    _first_mcp_use[:] = [settle]


def first_mcp_client_use(user_pk: int, now: Any) -> bool:
    return any(settle(user_pk, now=now) for settle in _first_mcp_use)


_storage_meter: list[tuple[Any, Any]] = []


def register_storage_meter(reserve: Any, release: Any) -> None:
    """Name the keeper of storage bytes (entitlements does, in its ``ready()``)."""
    _storage_meter[:] = [(reserve, release)]


def reserve_storage_bytes(user: Any, n: int) -> None:
    """Reserve ``n`` more stored bytes for ``user``; raises the coded limit error when the plan's
    ``storage_bytes`` would be passed. Call before writing; release if the write then fails."""
    if n <= 0:
        return
    if not _storage_meter:
        raise ImproperlyConfigured("no storage meter registered (is entitlements installed?)")
    _storage_meter[0][0](user, n)


def release_storage_bytes(user: Any, n: int) -> None:
    if n > 0 and _storage_meter:
        _storage_meter[0][1](user, n)


def _write_leases() -> WriteLeases:
    if not _leases:
        raise ImproperlyConfigured("no write-lease keeper registered (is entitlements installed?)")
    return _leases[0]


class WriteLeaseLost(Conflict):
    code = "write_lease_lost"
    message = (
        "The account's write lease was released by an operator while this change ran; "
        "check the result before retrying."
    )


def is_deleting(user: Any) -> bool:
    if getattr(user, "deleting_at", None) is not None:
        return True
    return User.objects.filter(pk=user.pk, deleting_at__isnull=False).exists()


def may_act(user: Any) -> bool:
    # Callers pass a row loaded for this request (bearer lookup, session middleware).
    if user is None or not getattr(user, "pk", None):
        return False
    return bool(user.is_active) and user.deleting_at is None and user.suspended_at is None


def may_sign_in(user: Any) -> bool:
    """A session may continue: not suspended nor deactivated. An account being deleted keeps
    its session to watch the deletion; every change it asks for is refused (``is_deleting``)."""
    return bool(user.is_active) and user.suspended_at is None


def assert_can_mutate(user: Any) -> None:
    if is_deleting(user):
        raise AccountDeleting()


@contextmanager
def write_guard(user: Any, holder: str) -> Iterator[None]:
    """Acquire → run the mutation → release. Refused (409 ``account_deleting``) once deletion
    has started, whether the account row or only the meter's tombstone says so yet. A lease
    the release finds gone was repaired by an operator mid-write: ``WriteLeaseLost``."""
    leases = _write_leases()
    uid, holder = str(user.stable_user_id), holder[:255]
    held = _held.get() or {}
    if uid in held:
        yield
        return
    assert_can_mutate(user)
    token = uuid.uuid4().hex
    leases.acquire_write_lease(uid, token, holder, timezone.now().isoformat())
    reset = _held.set({**held, uid: token})
    completed = False
    try:
        yield
        completed = True
    finally:
        _held.reset(reset)
        try:
            released = leases.release_write_lease(uid, token)["released"]
        except Exception:
            # The lease stays until an operator repairs it (adminAccountWriteLeaseRepair);
            # a deletion meanwhile stops at its drain bound and says who holds it.
            log.exception("write lease %s of %s (%s) was not released", token, uid, holder)
            released = True
    if completed and not released:
        raise WriteLeaseLost(details={"holder": holder})


class AccountPolicy:
    """The object ``KODY_ACCOUNT_POLICY`` names (kody.callers.AccountPolicy)."""

    is_deleting = staticmethod(is_deleting)
    may_act = staticmethod(may_act)
    write_guard = staticmethod(write_guard)
