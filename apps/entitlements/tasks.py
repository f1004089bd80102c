"""Celery tasks of entitlements (ids in, never model instances)."""

from __future__ import annotations

import logging

from celery import shared_task

log = logging.getLogger(__name__)

RETRY_AFTER_OUTAGE_SECONDS = 3600


@shared_task(
    name="entitlements.refresh_stripe_plan", queue="default", acks_late=True, ignore_result=True
)
def refresh_stripe_plan(stable_user_id: str) -> None:
    """The StripePlanRefresh alarm's work: re-read Stripe; re-arm once Stripe answers again."""
    from apps.accounts.models import User
    from apps.entitlements.actor.stripe_refresh import arm_refresh
    from apps.entitlements.services import billing

    if not billing.billing_enabled():
        return
    try:
        billing.refresh_plan_unsafe_in_transaction(stable_user_id)
    except User.DoesNotExist:
        return  # the account is gone; nothing to refresh
    except billing.BillingUnavailable:
        log.warning("stripe refresh failed; re-armed user=%s", stable_user_id)
        arm_refresh(stable_user_id, delay_seconds=RETRY_AFTER_OUTAGE_SECONDS)
