"""Keep the plan cache honest: any save of a user row drops that user's cached plan.

``QuerySet.update()`` sends no signal, so code that updates plan columns in bulk calls
``services.plan_cache.invalidate_plan`` itself (the Stripe refresh does).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save


def _user_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    from apps.entitlements.services.plan_cache import invalidate_plan

    stable_user_id = getattr(instance, "stable_user_id", None)
    if stable_user_id:
        invalidate_plan(stable_user_id)


def connect() -> None:
    post_save.connect(
        _user_saved, sender=settings.AUTH_USER_MODEL, dispatch_uid="entitlements-plan"
    )
