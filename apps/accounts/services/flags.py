"""Feature flags: one evaluation for code and templates, with daily exposure rollups.

Evaluation order for a signed-in person:
1. a per-user override decides outright (operators use it to force a flag on or off);
2. a missing or disabled flag is off;
3. an enabled flag without ``rollout_percent`` (or at 100) is on for everyone;
4. otherwise the person is on when their bucket — a stable hash of the flag key and their
   *stable* user id, so it survives email changes and differs per flag — falls under the
   percentage, or when they opted into experiments at /account/experiments (the
   ``experiments_opt_in`` audience joins every partial rollout early; ADR 0056).
Anonymous visitors see only flags that are fully on, and leave no exposure row.

Every evaluation for a person adds one to the (flag, user, day, enabled, source) rollup, which
retention keeps 90 days (``accounts_retention``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from apps.accounts.models import FeatureFlag, FeatureFlagExposureRollup, FeatureFlagUserOverride
from kody.errors import InvalidInput, NotFound

SOURCES = frozenset({"code", "template", "api"})
KEY_MAX = 128


def bucket(flag_key: str, stable_user_id: str) -> int:
    """0–99, the same for the same (flag, person) forever."""
    digest = hashlib.sha256(f"{flag_key}\0{stable_user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


@dataclass(frozen=True)
class Decision:
    enabled: bool
    reason: str  # override | off | everyone | rollout | experiments | outside | anonymous


def decide(flag: FeatureFlag | None, user: Any, override: bool | None = None) -> Decision:
    """Pure evaluation (no reads, no writes), so the rollout can be checked over many ids."""
    if override is not None:
        return Decision(override, "override")
    if flag is None or not flag.enabled:
        return Decision(False, "off")
    percent = flag.rollout_percent
    if percent is None or percent >= 100:
        return Decision(True, "everyone")
    if user is None:
        return Decision(False, "anonymous")
    if bucket(flag.key, user.stable_user_id) < percent:
        return Decision(True, "rollout")
    if getattr(user, "experiments_opt_in", False):
        return Decision(True, "experiments")
    return Decision(False, "outside")


def is_enabled(key: str, user: Any = None, *, source: str = "code") -> bool:
    """The one call site for code and templates (``{% flag "key" as on %}``)."""
    person = user if getattr(user, "is_authenticated", False) else None
    flag = FeatureFlag.objects.filter(key=key).first()
    override = None
    if person is not None:
        override = (
            FeatureFlagUserOverride.objects.filter(flag_key=key, user=person)
            .values_list("enabled", flat=True)
            .first()
        )
    decision = decide(flag, person, override)
    if person is not None and flag is not None:
        record_exposure(key, person.stable_user_id, decision.enabled, source)
    return decision.enabled


def record_exposure(key: str, stable_user_id: str, enabled: bool, source: str) -> None:
    # One upsert per evaluation: concurrent evaluations add up instead of racing on a read.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO feature_flag_exposure_rollups "
            "(flag_key, user_id, day, enabled, source, exposure_count, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, 1, %s) "
            "ON CONFLICT (flag_key, user_id, day, enabled, source) "
            "DO UPDATE SET exposure_count = feature_flag_exposure_rollups.exposure_count + 1, "
            "updated_at = EXCLUDED.updated_at",
            [key, stable_user_id, timezone.now().date(), enabled, source[:64], timezone.now()],
        )


def readout(key: str) -> dict[str, int]:
    """This month's exposures for a flag and the on/off split (people and evaluations)."""
    start = timezone.now().date().replace(day=1)
    rows = FeatureFlagExposureRollup.objects.filter(flag_key=key, day__gte=start)
    totals = rows.aggregate(
        on=Sum("exposure_count", filter=Q(enabled=True), default=0),
        off=Sum("exposure_count", filter=Q(enabled=False), default=0),
        people_on=Count("user_id", filter=Q(enabled=True), distinct=True),
        people_off=Count("user_id", filter=Q(enabled=False), distinct=True),
    )
    return {
        "exposures": totals["on"] + totals["off"],
        "exposuresOn": totals["on"],
        "exposuresOff": totals["off"],
        "peopleOn": totals["people_on"],
        "peopleOff": totals["people_off"],
    }


def _clean_key(key: str) -> str:
    key = key.strip()
    if not key or len(key) > KEY_MAX:
        raise InvalidInput("A flag key is 1–128 characters.", details={"field": "key"})
    return key


def set_flag(
    key: str,
    *,
    enabled: bool,
    rollout_percent: int | None,
    note: str | None,
    actor: Any,
) -> FeatureFlag:
    key = _clean_key(key)
    if rollout_percent is not None and not 0 <= rollout_percent <= 100:
        raise InvalidInput("rolloutPercent is 0–100.", details={"field": "rolloutPercent"})
    with transaction.atomic():
        flag, _ = FeatureFlag.objects.select_for_update().get_or_create(key=key)
        flag.enabled = enabled
        flag.rollout_percent = rollout_percent
        if note is not None:
            flag.note = note
        flag.updated_by = actor
        flag.save()
    return flag


def set_override(key: str, user: Any, enabled: bool | None, *, actor: Any) -> bool | None:
    """Force ``key`` on/off for one person; ``enabled=None`` removes the override."""
    key = _clean_key(key)
    if not FeatureFlag.objects.filter(key=key).exists():
        raise NotFound("No such flag.", details={"key": key})
    if enabled is None:
        FeatureFlagUserOverride.objects.filter(flag_key=key, user=user).delete()
        return None
    FeatureFlagUserOverride.objects.update_or_create(
        flag_key=key, user=user, defaults={"enabled": enabled, "updated_by": actor}
    )
    return enabled
