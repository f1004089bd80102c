"""May this account act? The one policy every surface asks (API, MCP, account UI, admin, kernel).

``settings.KODY_ACCOUNT_POLICY`` names :class:`AccountPolicy`, so the kernel reaches these
answers without importing this app. Two questions, one function each:

* ``is_deleting(user)``: deletion has started; every mutation is refused (409 ``account_deleting``).
  Read fresh from the row: the fence may have been set after this caller authenticated.
* ``may_act(user)``: the account may sign in, use a token or reset its password at all —
  active, not suspended, not being deleted.
* ``may_sign_in(user)``: an existing session may continue — active and not suspended.
"""

from __future__ import annotations

from typing import Any

from apps.accounts.models import User
from kody.errors import AccountDeleting


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


class AccountPolicy:
    """The object ``KODY_ACCOUNT_POLICY`` names (kody.callers.AccountPolicy)."""

    is_deleting = staticmethod(is_deleting)
    may_act = staticmethod(may_act)
