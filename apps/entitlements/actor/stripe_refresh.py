"""StripePlanRefresh: a per-user one-shot alarm that re-reads the Stripe plan later.

Checkout and subscription webhooks refresh the plan at once; this alarm is the backstop for a
lost webhook or a Stripe outage at that moment. Arming never postpones an alarm already set;
the alarm itself only writes the refresh to the transactional outbox (no network call under
the lock): it commits with the alarm's deletion, so a worker dying right after COMMIT loses
nothing, and the outbox relays it at least once (the refresh re-reads Stripe: idempotent).
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from kody import outbox
from kody.actors import Actor, deletion_safe

REFRESH_DELAY = timedelta(minutes=10)


class StripePlanRefresh(Actor):
    name = "entitlements.StripePlanRefresh"

    def arm(self, delay_seconds: int | None = None) -> dict[str, str]:
        delay = REFRESH_DELAY if delay_seconds is None else timedelta(seconds=delay_seconds)
        at = timezone.now() + delay
        self.set_alarm(at)
        return {"armed_for": at.isoformat()}

    @deletion_safe
    def cancel(self) -> dict[str, bool]:
        self.clear_alarm()
        return {"cancelled": True}

    def alarm(self) -> None:
        # One message per alarm firing: the fire call's id names the alarm time.
        outbox.enqueue(
            "entitlements.refresh_stripe_plan",
            {"stable_user_id": self.user_id},
            key=f"entitlements.stripe-plan-refresh:{self.context.call_id}",
            using=self.context.using,
        )


def arm_refresh(stable_user_id: str, delay_seconds: int | None = None) -> None:
    StripePlanRefresh.cast(stable_user_id, "arm", delay_seconds=delay_seconds)


def cancel_refresh(stable_user_id: str) -> None:
    StripePlanRefresh.cast(stable_user_id, "cancel")
