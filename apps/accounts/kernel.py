"""What the kernel asks the accounts app: ``KODY_ACCOUNT_DIRECTORY`` names ``account_states``
(see ``kody/userschema/accounts.py``). The deletion job (``apps.accounts.deletion.job``) sets
and clears the kernel's tombstone itself."""

from __future__ import annotations

from collections.abc import Collection

from apps.accounts.models import User
from kody.userschema.accounts import AccountState


def account_states(user_ids: Collection[str], using: str) -> dict[str, AccountState]:
    """One indexed query: live, or marked for deletion (``users.deleting_at``)."""
    rows = User.objects.using(using).filter(stable_user_id__in=list(user_ids))
    return {
        stable_id: AccountState.DELETING if deleting_at is not None else AccountState.LIVE
        for stable_id, deleting_at in rows.values_list("stable_user_id", "deleting_at")
    }
