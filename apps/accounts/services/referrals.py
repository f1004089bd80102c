"""Referrals: the ``kody_ref`` attribution cookie, the signup-time row, and the reward.

A link with ``?ref=<username>`` sets the signed ``kody_ref`` cookie for a week (a later link
replaces it: last wins). Signup turns it into one ``referrals`` row for the new account. The
reward waits for the referee's first paid Stripe invoice (``invoice.paid`` with an amount): the
referrer's stackable Standard overlay (``referral_standard_credit_expires_at``) grows by
``REWARD``. While the referee's email is unverified the invoice is held on the row and the
reward is granted when they verify. A conditional update (pending → rewarded) grants it, so two
deliveries of one webhook, or a webhook racing the verification, reward once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.signing import BadSignature
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from apps.accounts import usernames
from apps.accounts.models import Referral, User
from apps.accounts.models.campaigns import ReferralStatus
from apps.accounts.models.users import AccountType

COOKIE = "kody_ref"
COOKIE_SALT = "kody.referral"
COOKIE_MAX_AGE = timedelta(days=7)
REWARD = timedelta(days=30)


def remember(request: HttpRequest, response: HttpResponse) -> None:
    """Set ``kody_ref`` from ``?ref=`` (a well-formed username only; last wins)."""
    ref = (request.GET.get("ref") or "").strip().lower()
    if not ref or usernames.format_error(ref):
        return
    response.set_signed_cookie(
        COOKIE,
        ref,
        salt=COOKIE_SALT,
        max_age=int(COOKIE_MAX_AGE.total_seconds()),
        httponly=True,
        samesite="Lax",
        secure=not settings.DEBUG and request.is_secure(),
    )


def referrer_username(request: HttpRequest) -> str | None:
    try:
        value = request.get_signed_cookie(
            COOKIE, default=None, salt=COOKIE_SALT, max_age=COOKIE_MAX_AGE
        )
    except BadSignature:
        return None
    return value or None


def attribute(referee: User, referrer_name: str | None) -> Referral | None:
    """The signup-time row: a person account that exists and is not the referee."""
    if not referrer_name:
        return None
    referrer = User.objects.filter(
        username=referrer_name, account_type=AccountType.PERSON, deleting_at__isnull=True
    ).first()
    if referrer is None or referrer.pk == referee.pk:
        return None
    row, _ = Referral.objects.get_or_create(
        referee_stable_user_id=referee.stable_user_id,
        defaults={"referrer_stable_user_id": referrer.stable_user_id},
    )
    return row


def reward_for_invoice(referee_id: str, invoice_id: str, period_end: datetime | None) -> str:
    """``rewarded``, ``held`` (referee unverified), or ``none`` (no pending referral, or this
    reward was already granted)."""
    row = Referral.objects.filter(
        referee_stable_user_id=referee_id, status=ReferralStatus.PENDING
    ).first()
    if row is None:
        return "none"
    verified = User.objects.filter(
        stable_user_id=referee_id, email_verified_at__isnull=False
    ).exists()
    if not verified:
        Referral.objects.filter(
            pk=row.pk, status=ReferralStatus.PENDING, held_invoice_id__isnull=True
        ).update(held_invoice_id=invoice_id, held_period_end_at=period_end)
        return "held"
    return "rewarded" if _grant(row.pk, invoice_id) else "none"


def release_held(referee: User) -> bool:
    """After the referee verifies: grant a reward held for an invoice paid before."""
    row = Referral.objects.filter(
        referee_stable_user_id=referee.stable_user_id,
        status=ReferralStatus.PENDING,
        held_invoice_id__isnull=False,
    ).first()
    return row is not None and _grant(row.pk, str(row.held_invoice_id))


def _grant(referral_id: int, invoice_id: str) -> bool:
    now = timezone.now()
    with transaction.atomic():
        won = Referral.objects.filter(pk=referral_id, status=ReferralStatus.PENDING).update(
            status=ReferralStatus.REWARDED,
            reward_invoice_id=invoice_id,
            rewarded_at=now,
            credits_granted_at=now,
            held_invoice_id=None,
            held_period_end_at=None,
        )
        if won != 1:
            return False
        referrer_id = Referral.objects.values_list("referrer_stable_user_id", flat=True).get(
            pk=referral_id
        )
        referrer = User.objects.select_for_update().filter(stable_user_id=referrer_id).first()
        if referrer is not None:
            start = max(now, referrer.referral_standard_credit_expires_at or now)
            referrer.referral_standard_credit_expires_at = start + REWARD
            # A save (not an update) so the plan cache drops the referrer's cached plan.
            referrer.save(update_fields=["referral_standard_credit_expires_at", "updated_at"])
    return True
