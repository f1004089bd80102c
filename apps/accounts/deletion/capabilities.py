"""Operator capabilities of account deletion: write leases and the unverified purge."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import transaction

from apps.accounts.models import AccountWriteLeaseRepair
from apps.accounts.services.lookup import account_by_stable_id
from kody.capabilities import Context, capability
from kody.errors import Conflict

TARGET = {
    "type": "object",
    "properties": {"userId": {"type": "string", "minLength": 1, "maxLength": 64}},
    "required": ["userId"],
    "additionalProperties": False,
}
REPAIR = {
    "type": "object",
    "properties": {
        "userId": {"type": "string", "minLength": 1, "maxLength": 64},
        "token": {"type": "string", "minLength": 1, "maxLength": 255},
        "reason": {"type": "string", "minLength": 1, "maxLength": 500},
    },
    "required": ["userId", "token", "reason"],
    "additionalProperties": False,
}
PURGE_RUN = {
    "type": "object",
    "properties": {
        "dryRun": {"type": "boolean"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 200},
    },
    "additionalProperties": False,
}


@capability(
    name="adminAccountWriteLeaseList",
    domain="admin",
    role="admin",
    title="An account's write leases (operator)",
    description="The write leases one account holds in its UserMeter: token, holder, since.",
    input_schema=TARGET,
)
def admin_account_write_lease_list(ctx: Context, userId: str) -> dict[str, Any]:  # noqa: N803
    from apps.entitlements.services import metering

    user = account_by_stable_id(userId)
    leases = metering.list_write_leases(user.stable_user_id)
    return {"userId": user.stable_user_id, "leases": leases}


@capability(
    name="adminAccountWriteLeaseRepair",
    domain="admin",
    role="admin",
    mutates=True,
    title="Release a stuck write lease (operator)",
    description=(
        "Force-release one stuck write lease, audit first: prepare (tag the lease), write the "
        "repair audit row, then finalize (drop it). Safe to retry after any partial failure."
    ),
    input_schema=REPAIR,
)
def admin_account_write_lease_repair(
    ctx: Context,
    userId: str,  # noqa: N803
    token: str,
    reason: str,
) -> dict[str, Any]:
    from apps.entitlements.services import metering

    user = account_by_stable_id(userId)
    repair_id = hashlib.sha256(f"{user.stable_user_id}\0{token}".encode()).hexdigest()[:32]
    prepared = metering.prepare_lease_repair(user.stable_user_id, token, repair_id)
    existing = AccountWriteLeaseRepair.objects.filter(id=repair_id).first()
    if not prepared["prepared"] and existing is None:
        raise Conflict(
            "No such lease, or another repair is pending on it.",
            details={"reason": prepared.get("reason", "")},
        )
    if existing is None:
        with transaction.atomic():
            AccountWriteLeaseRepair.objects.create(
                id=repair_id,
                target_user_id=user.stable_user_id,
                lease_token=token,
                lease_holder=prepared["holder"],
                lease_acquired_at=prepared["acquired_at"],
                repaired_by_user_id=ctx.user.stable_user_id,
                reason=reason,
            )
    finalized = metering.finalize_lease_repair(user.stable_user_id, token, repair_id)
    return {"userId": user.stable_user_id, "repairId": repair_id, **finalized}


@capability(
    name="adminUnverifiedAccountPurgeRun",
    domain="admin",
    role="admin",
    mutates=True,
    title="Run the unverified-account purge (operator)",
    description=(
        "One bounded pass of the unverified_account_purge lane now, or with dryRun the accounts "
        "it would claim. Outcomes are keyed by stable user id."
    ),
    input_schema=PURGE_RUN,
)
def admin_unverified_account_purge_run(
    ctx: Context,
    dryRun: bool = False,  # noqa: N803
    limit: int = 50,
) -> dict[str, Any]:
    from apps.accounts.deletion import unverified

    outcomes = unverified.run_pass(limit=limit, dry_run=dryRun)
    return {"dryRun": dryRun, "outcomes": [o.as_dict() for o in outcomes]}
