"""Whose ids are live accounts: the one thing the kernel asks the accounts app.

The kernel never imports ``apps.*``. It asks a callable named by the setting
``KODY_ACCOUNT_DIRECTORY`` (resolved with ``import_string``, the way django-tenants resolves
its tenant model) for the state of stable user ids, whenever it would create a schema — a
cold path, so the hot path reads no shared table:

* only a ``LIVE`` account gets a schema;
* a ``DELETING`` one is refused with ``kody.errors.AccountDeleting`` (409,
  ``account_deleting``), an ``ABSENT`` one with ``NoLiveAccount`` (404,
  ``account_not_found``); nothing is created either way.

For a user who has a schema, "being deleted" is the registry's tombstone, which the accounts
app sets through ``kody.userschema.schemas.mark_deleting`` when it stamps
``users.deleting_at`` (the deletion job's ``mark`` step); from then on only
``@kody.actors.deletion_safe`` methods run. The accounts app's directory is
``apps.accounts.kernel.account_states``.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Collection, Mapping
from typing import Protocol

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils.module_loading import import_string

from kody.errors import NotFound


class AccountState(enum.StrEnum):
    LIVE = "live"
    DELETING = "deleting"  # marked for deletion; only deletion-safe methods run
    ABSENT = "absent"  # no account with this stable id


class AccountDirectory(Protocol):
    """``KODY_ACCOUNT_DIRECTORY`` names a callable of this shape. Ids missing from the result
    are ``ABSENT``. It runs on the caller's database connection (``using``), inside the
    actor call's transaction when there is one; it must not call actors."""

    def __call__(self, user_ids: Collection[str], using: str) -> Mapping[str, AccountState]: ...


class NoLiveAccount(NotFound):
    """The id has no live account and no actor state: nothing ran and nothing was created."""

    code = "account_not_found"
    message = "There is no account with this id."


@functools.cache
def _directory(path: str) -> AccountDirectory:
    return import_string(path)


def account_states(
    user_ids: Collection[str], using: str = DEFAULT_DB_ALIAS
) -> dict[str, AccountState]:
    if not user_ids:
        return {}
    found = _directory(settings.KODY_ACCOUNT_DIRECTORY)(user_ids, using)
    return {user_id: AccountState(found.get(user_id, AccountState.ABSENT)) for user_id in user_ids}


def account_state(user_id: str, using: str = DEFAULT_DB_ALIAS) -> AccountState:
    return account_states([user_id], using)[user_id]
