"""What the kernel asks the accounts app, and the accounts app's side of the deletion fence.

``KODY_ACCOUNT_DIRECTORY`` names ``account_states`` (see ``kody/userschema/accounts.py``).
"""

from __future__ import annotations

from collections.abc import Collection

from django.utils import timezone

from apps.accounts.models import User
from kody.userschema import schemas
from kody.userschema.accounts import AccountState


def account_states(user_ids: Collection[str], using: str) -> dict[str, AccountState]:
    """One indexed query: live, or marked for deletion (``users.deleting_at``)."""
    rows = User.objects.using(using).filter(stable_user_id__in=list(user_ids))
    return {
        stable_id: AccountState.DELETING if deleting_at is not None else AccountState.LIVE
        for stable_id, deleting_at in rows.values_list("stable_user_id", "deleting_at")
    }


def mark_account_deleting(user: User) -> None:
    """Mark the account for deletion everywhere the kernel looks: ``users.deleting_at`` (every
    surface refuses mutations) and the registry tombstone (every actor runs only
    deletion-safe methods; returns after a running call has finished). Idempotent."""
    User.objects.filter(pk=user.pk, deleting_at__isnull=True).update(deleting_at=timezone.now())
    schemas.mark_deleting(user.stable_user_id)


def finish_account_deletion(stable_user_id: str) -> None:
    """The deletion is complete (the users row is gone): clear the kernel's tombstone, so the
    same email can sign up again."""
    schemas.finish_deletion(stable_user_id)
