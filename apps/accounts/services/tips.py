"""The Kody tips opt-out: one ``user_tips_email_opt_outs`` row silences the usage-state campaign
mail (the onboarding steps, the cooling check-in, the advocate mail). The entitlement warning
is about the person's own account, not a tip, and still goes out.

A person opts out (and back in) on ``/account/settings``, or from the one-click link every tips
mail carries. That link holds a signed token naming the account (its row id and stable id, so
an id released by a deletion and minted again for a new signup does not inherit an old link);
the salt keeps tokens signed for other purposes (export cursors, OAuth state) from passing
here. The token does not expire: an unsubscribe link has to keep working as long as the mail
that carries it sits in an inbox.
"""

from __future__ import annotations

from django.core import signing
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import User, UserTipsEmailOptOut
from apps.accounts.services.onetime import InvalidToken

SALT = "kody.accounts.tips-unsubscribe"


def is_opted_out(user: User) -> bool:
    return UserTipsEmailOptOut.objects.filter(user_id=user.stable_user_id).exists()


def set_opted_out(user: User, opted_out: bool) -> bool:
    """Idempotent either way; the original stamp survives a repeated opt-out."""
    uid = user.stable_user_id
    if opted_out:
        # ON CONFLICT DO NOTHING: two clicks at once (the mail client's one-click POST and the
        # person on the confirm page) both succeed without an integrity error.
        UserTipsEmailOptOut.objects.bulk_create(
            [UserTipsEmailOptOut(user_id=uid, opted_out_at=timezone.now())],
            ignore_conflicts=True,
        )
    else:
        UserTipsEmailOptOut.objects.filter(user_id=uid).delete()
    return opted_out


def unsubscribe_token(user: User) -> str:
    return signing.dumps({"i": user.pk, "u": user.stable_user_id}, salt=SALT)


def unsubscribe_url(site: str, user: User) -> str:
    path = reverse("accounts:tips_unsubscribe")
    return f"{site.rstrip('/')}{path}?token={unsubscribe_token(user)}"


def user_for_token(token: str) -> User:
    """The account a token names; ``invalid_token`` (400) for anything tampered, signed with
    another salt, or naming an account that is gone."""
    refused = InvalidToken("This unsubscribe link is not valid. Change tips mail in Settings.")
    if not token or len(token) > 512:
        raise refused
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise refused from None
    if not isinstance(data, dict):
        raise refused
    user = User.objects.filter(pk=data.get("i"), stable_user_id=data.get("u")).first()
    if user is None:
        raise refused
    return user
