"""StripePlanRefresh: a per-user one-shot alarm that re-reads the Stripe plan later.

Checkout and subscription webhooks refresh the plan at once; this alarm is the backstop for a
lost webhook or a Stripe outage at that moment. Arming never postpones an alarm already set;
the alarm itself only queues the refresh task after commit (no network call under the lock).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

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
        from apps.entitlements.tasks import refresh_stripe_plan

        user_id = self.user_id
        transaction.on_commit(lambda: refresh_stripe_plan.delay(user_id))


def arm_refresh(stable_user_id: str, delay_seconds: int | None = None) -> None:
    StripePlanRefresh.cast(stable_user_id, "arm", delay_seconds=delay_seconds)


def cancel_refresh(stable_user_id: str) -> None:
    StripePlanRefresh.cast(stable_user_id, "cancel")
