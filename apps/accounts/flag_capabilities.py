"""Operator capabilities for feature flags: list with readout, set, and per-user overrides.

The writes are audit-first: the intent row lands in the audit database before the flag changes
(``audit.record_first``), and the capability kernel adds the outcome row after.
"""

from __future__ import annotations

from typing import Any

from apps.accounts.models import FeatureFlag, FeatureFlagUserOverride
from apps.accounts.services import audit, flags
from apps.accounts.services.lookup import account_by_stable_id
from kody.capabilities import Context, capability

KEY = {"type": "string", "minLength": 1, "maxLength": 128}


def _flag_view(flag: FeatureFlag) -> dict[str, Any]:
    return {
        "key": flag.key,
        "enabled": flag.enabled,
        "rolloutPercent": flag.rollout_percent,
        "note": flag.note,
        "updatedAt": flag.updated_at.isoformat(),
    }


@capability(
    name="adminFeatureFlagList",
    domain="admin",
    role="admin",
    title="List feature flags (operator)",
    description=(
        "Every feature flag with its switch, rollout percentage, override count and this "
        "month's exposures (total, on/off split and distinct people on each side)."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)
def admin_feature_flag_list(ctx: Context) -> dict[str, Any]:
    rows = []
    for flag in FeatureFlag.objects.order_by("key"):
        overrides = FeatureFlagUserOverride.objects.filter(flag_key=flag.key).count()
        rows.append(
            {**_flag_view(flag), "overrides": overrides, "readout": flags.readout(flag.key)}
        )
    return {"flags": rows}


@capability(
    name="adminFeatureFlagSet",
    domain="admin",
    role="admin",
    mutates=True,
    title="Create or change a feature flag (operator)",
    description=(
        "Set a flag's switch and rollout percentage (null = everyone once enabled); people "
        "outside the percentage who opted into experiments also see it."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "key": KEY,
            "enabled": {"type": "boolean"},
            "rolloutPercent": {"type": ["integer", "null"], "minimum": 0, "maximum": 100},
            "note": {"type": "string", "maxLength": 2000},
        },
        "required": ["key", "enabled"],
        "additionalProperties": False,
    },
)
def admin_feature_flag_set(
    ctx: Context,
    key: str,
    enabled: bool,
    rolloutPercent: int | None = None,  # noqa: N803
    note: str | None = None,
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminFeatureFlagSet", f"flag={key[:128]}")
    flag = flags.set_flag(
        key, enabled=enabled, rollout_percent=rolloutPercent, note=note, actor=ctx.user
    )
    return _flag_view(flag)


@capability(
    name="adminFeatureFlagOverride",
    domain="admin",
    role="admin",
    mutates=True,
    title="Force a flag on or off for one person (operator)",
    description="Per-user override by stable user id; enabled null removes the override.",
    input_schema={
        "type": "object",
        "properties": {
            "key": KEY,
            "userId": {"type": "string", "minLength": 1, "maxLength": 64},
            "enabled": {"type": ["boolean", "null"]},
        },
        "required": ["key", "userId", "enabled"],
        "additionalProperties": False,
    },
)
def admin_feature_flag_override(
    ctx: Context,
    key: str,
    userId: str,  # noqa: N803
    enabled: bool | None,
) -> dict[str, Any]:
    target = account_by_stable_id(userId)
    audit.record_intent(ctx, "adminFeatureFlagOverride", f"flag={key[:128]}")
    result = flags.set_override(key, target, enabled, actor=ctx.user)
    return {"key": key, "userId": target.stable_user_id, "enabled": result}
