"""The second-agent gift (seed: product signals): a 14-day Standard overlay the first time the
number of distinct MCP OAuth clients a person has used reaches two. Written once, under the
user's row lock, so two clients connecting at the same moment grant it once; the expiry is set
only when the overlay actually raises the account (a free plan)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from apps.accounts.models import OAuthGrant, User
from apps.entitlements.plans import Plan, effective_plan_for
from apps.entitlements.services.plan_cache import invalidate_plan_now

SECOND_AGENT_GIFT = timedelta(days=14)
SECOND_AGENT_CLIENTS = 2


def settle_second_agent_gift(user_id: int, *, now: datetime) -> bool:
    """Write the gift once when distinct used clients reach two; True if this call wrote it."""
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user_id)
        if user.second_agent_standard_gift_granted_at is not None:
            return False
        used = (
            OAuthGrant.objects.filter(user_id=user_id, first_used_at__isnull=False)
            .values("client_id")
            .distinct()
            .count()
        )
        if used < SECOND_AGENT_CLIENTS:
            return False
        raises = effective_plan_for(user, now=now) is Plan.FREE
        user.second_agent_standard_gift_granted_at = now
        user.second_agent_standard_gift_expires_at = now + SECOND_AGENT_GIFT if raises else None
        user.save(
            update_fields=[
                "second_agent_standard_gift_granted_at",
                "second_agent_standard_gift_expires_at",
            ]
        )
        stable_user_id = user.stable_user_id
    if raises:
        invalidate_plan_now(stable_user_id)
    return True
