"""Entitlements capabilities: the caller's own usage, and operator views of one user's meter."""

from __future__ import annotations

from typing import Any

from apps.accounts.services.lookup import account_by_stable_id
from apps.entitlements.services import metering, reconcile, summary, usage
from kody.capabilities import Context, capability

USAGE_ROW = {
    "type": "object",
    "properties": {
        "resource": {"type": "string"},
        "label": {"type": "string"},
        "kind": {"type": "string", "enum": ["daily", "count", "bytes"]},
        "unit": {"type": "string"},
        "limit": {"type": "integer"},
        "used": {"type": ["integer", "null"]},
        "percent": {"type": ["integer", "null"]},
        "resets_at": {"type": ["string", "null"], "format": "date-time"},
    },
    "required": ["resource", "kind", "unit", "limit", "used", "resets_at"],
}
USAGE_OUTPUT = {
    "type": "object",
    "properties": {
        "plan": {"type": "string", "enum": ["free", "standard", "pro", "max"]},
        "day": {"type": "string", "format": "date"},
        "dailyResetsAt": {"type": "string", "format": "date-time"},
        "resources": {"type": "array", "items": USAGE_ROW},
    },
    "required": ["plan", "day", "dailyResetsAt", "resources"],
}
TARGET_USER = {
    "type": "object",
    "properties": {
        "userId": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "description": "The target account's stable user id.",
        },
    },
    "required": ["userId"],
    "additionalProperties": False,
}


@capability(
    name="accountUsage",
    domain="account",
    title="Usage against plan limits",
    description=(
        "The caller's plan and, for every plan limit, today's (daily limits) or current use, "
        "the limit, its unit and when it resets (UTC midnight for daily limits)."
    ),
    output_schema=USAGE_OUTPUT,
    rest=("GET", "account/usage"),
)
def account_usage(ctx: Context) -> dict[str, Any]:
    return summary.usage_summary_json(ctx.user)


@capability(
    name="adminUserUsage",
    domain="admin",
    role="admin",
    title="A user's usage (operator)",
    description="One account's plan, limits, today's meter counts and monthly usage rollups.",
    input_schema=TARGET_USER,
)
def admin_user_usage(ctx: Context, userId: str) -> dict[str, Any]:  # noqa: N803
    target = account_by_stable_id(userId)
    rollups = [
        {
            "month": r.month,
            "metric": r.metric,
            "events": r.event_count,
            "errors": r.error_count,
            "durationMs": r.total_duration_ms,
            "cpuMs": r.total_cpu_ms,
            "bytes": r.total_bytes,
        }
        for r in usage.monthly_usage(target.stable_user_id)
    ]
    return {
        "userId": target.stable_user_id,
        **summary.usage_summary_json(target),
        "monthly": rollups,
    }


@capability(
    name="adminUserMeterParity",
    domain="admin",
    role="admin",
    title="A user's meter-only daily counts (operator)",
    description=(
        "The UserMeter's retained daily counter rows for one account (seven UTC days). There is "
        "no shared daily-counter table to compare with: the meter is the only authority."
    ),
    input_schema=TARGET_USER,
)
def admin_user_meter_parity(ctx: Context, userId: str) -> dict[str, Any]:  # noqa: N803
    target = account_by_stable_id(userId)
    rows = metering.daily_history(target.stable_user_id)
    return {"userId": target.stable_user_id, "source": "user_meter", "dailyCounters": rows}


@capability(
    name="adminUserMeterStorageReconcile",
    domain="admin",
    role="admin",
    title="Recompute a user's storage bytes (operator)",
    description="Recompute one account's payload bytes from its rows and set them in the meter.",
    input_schema=TARGET_USER,
)
def admin_user_meter_storage_reconcile(ctx: Context, userId: str) -> dict[str, Any]:  # noqa: N803
    target = account_by_stable_id(userId)
    changed = reconcile.reconcile_user(target.stable_user_id)
    state = metering.read_storage_bytes(target.stable_user_id)
    return {"userId": target.stable_user_id, "bytes": state["bytes"], "changed": changed}
