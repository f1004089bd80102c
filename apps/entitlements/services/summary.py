"""The per-limit usage summary behind /account/usage, usage.json and ``accountUsage``."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from apps.entitlements.plans import LIMITS, RESOURCES, Kind, Plan, Resource
from apps.entitlements.services import counters
from apps.entitlements.services import metering as meter
from apps.entitlements.services.enforcement import next_utc_midnight, user_id_of, utc_day
from apps.entitlements.services.plan_cache import cached_plan
from kody.actors import ActorError

log = logging.getLogger(__name__)

# The <meter> turns to its warning colour from this share of the limit.
HIGH_SHARE = 0.8
# A page render waits this long for the meter, then shows limits without counts.
SNAPSHOT_TIMEOUT_SECONDS = 3.0
EMPTY_SNAPSHOT: dict[str, Any] = {
    "daily": {},
    "storage_bytes": None,
    "package_services": None,
    "counts": {},
}


def _display(value: int | None, res: Resource) -> str:
    if value is None:
        return "—"
    return str(filesizeformat(value)) if res.kind is Kind.BYTES else f"{value:,}"


def _percent(used: int | None, limit: int) -> int | None:
    if used is None:
        return None
    if limit <= 0:
        return 100 if used > 0 else 0
    return min(100, round(100 * used / limit))


def _row(res: Resource, limit: int, used: int | None, resets_at: datetime | None) -> dict[str, Any]:
    return {
        "resource": res.name,
        "name": res.name,
        "label": res.label,
        "kind": res.kind.value,
        "unit": res.unit,
        "limit": limit,
        "used": used,
        "resets_at": resets_at,
        "percent": _percent(used, limit),
        "high": int(limit * HIGH_SHARE),
        "used_display": _display(used, res),
        "limit_display": _display(limit, res),
    }


def _used(uid: str, res: Resource, snapshot: dict[str, Any], local: counters.Local) -> int | None:
    services = snapshot["package_services"]
    if res.kind is Kind.DAILY:
        value = snapshot["daily"].get(res.name)
        return None if value is None else int(value)
    if res.name == "storage_bytes":
        stored = snapshot["storage_bytes"]
        return None if stored is None else int(stored) + local.bucket_bytes
    if res.name == "package_services":
        return None if services is None else int(services["running"])
    if res.name == "persistent_package_services":
        return None if services is None else int(services["persistent_running"])
    if res.name == "email_message_bytes":
        return None  # a per-message cap, not an accumulating use
    if res.name in local.tables:
        return local.tables[res.name]
    if res.name in snapshot.get("counts", {}):
        return int(snapshot["counts"][res.name])
    if not local.has_state(res.name):
        return 0  # its actor never ran for this user: nothing to count, nobody to ask
    return counters.count(uid, res.name)


def usage_summary(
    user: Any, *, now: datetime | None = None, strict: bool = False
) -> dict[str, Any]:
    """``{"plan", "plan_label", "metered", "daily_resets_at", "resources": [row, ...]}``.

    Each row: ``resource``, ``label``, ``kind`` (daily/count/bytes), ``unit``, ``limit``,
    ``used`` (today for daily resources, current otherwise; None when not measured here),
    ``resets_at`` (next UTC midnight for daily resources, else None), ``percent`` and display
    strings. Three round trips in all: the cached plan, ONE query for the row counts, the
    storage buckets and which actors have state (``counters.read_local``), and ONE UserMeter
    call that also counts, in the same transaction, what other actors registered as schema
    counts (``concurrent_workflows``). A counter with neither form is asked on its own.

    A page (``strict=False``) shows limits without the meter's counts when the meter does not
    answer in time (``metered`` False). An agent's read (``strict=True``: the API and the
    ``accountUsage`` capability) gets the meter's error instead (503 ``actor_unavailable``
    with ``Retry-After``), never a partial answer it could take for "nothing used".
    """
    now = now or timezone.now()
    uid = user_id_of(user)
    plan: Plan = cached_plan(uid)
    names = [res.name for res in RESOURCES.values() if res.kind is not Kind.DAILY]
    local = counters.read_local(uid, names)
    in_meter = [name for name in names if counters.schema_count_sql(name) and local.has_state(name)]
    try:
        snapshot = meter.snapshot(
            uid, utc_day(now), timeout=SNAPSHOT_TIMEOUT_SECONDS, counts=in_meter
        )
        metered = True
    except ActorError:
        if strict:
            raise
        log.warning("usage summary without meter counts user=%s", uid, exc_info=True)
        snapshot, metered = EMPTY_SNAPSHOT, False
    midnight = next_utc_midnight(now)
    rows = [
        _row(
            res,
            LIMITS[plan][res.name],
            _used(uid, res, snapshot, local),
            midnight if res.kind is Kind.DAILY else None,
        )
        for res in RESOURCES.values()
    ]
    return {
        "plan": plan.value,
        "plan_label": plan.label,
        "metered": metered,
        "day": utc_day(now),
        "daily_resets_at": midnight,
        "resources": rows,
    }


def usage_summary_json(user: Any, *, now: datetime | None = None) -> dict[str, Any]:
    summary = usage_summary(user, now=now, strict=True)
    rows = [
        {
            key: (value.isoformat() if isinstance(value, datetime) else value)
            for key, value in row.items()
            if key not in ("name", "high", "used_display", "limit_display")
        }
        for row in summary["resources"]
    ]
    return {
        "plan": summary["plan"],
        "metered": summary["metered"],
        "day": summary["day"],
        "dailyResetsAt": summary["daily_resets_at"].isoformat(),
        "resources": rows,
    }
