"""What an imported job may not bring (``apps.accounts.importing``).

A job runs with the grant of the token that scheduled it; that token belongs to the old
instance and is never exported. So an imported job arrives disabled, with an empty grant
rebuilt here (never the archive's caller context), its storage id rebuilt from its id, its
next run computed from its schedule, and no claim or lease. Enabling it (``jobUpdate`` or
the account page) grants it the enabling token's scopes.
"""

from __future__ import annotations

from typing import Any

from apps.accounts.importing import ImportContext, ImportRefused, import_rule
from apps.jobs import schedules, targets
from kody.errors import InvalidInput

NOTE = "jobs: imported disabled and without a grant; enable each one to run it again"


@import_rule("jobs")
def imported_job(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    job_id = str(values.get("id") or "")
    target = (values.get("params_json") or {}).get("target")
    try:
        if target is not None:
            targets.parse_target(target)
        first = schedules.next_run_at(values["schedule_json"], values["timezone"], ctx.now)
    except (InvalidInput, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ImportRefused(f"job {job_id[:80]!r} has no valid target or schedule") from exc
    source = values.get("source_id") or ""
    if source and source not in ctx.archive_values("entity_sources", "id"):
        ctx.warn(f"jobs: {job_id[:80]} named a source not in the export; the link is cleared")
        values["source_id"] = ""
    values.update(
        enabled=False,
        caller_context_json={
            "userId": ctx.new_id,
            "surface": "import",
            "scopes": [],
            "principal": f"import:{ctx.new_id}",
        },
        storage_id=f"job:{job_id}",
        next_run_at=first or ctx.now,
        claim_token=None,
        running_since=None,
        lease_expires_at=None,
        started_by=None,
        claimed_scheduled_for=None,
        retry_scheduled_for=None,
        retry_count=0,
    )
    if NOTE not in ctx.warnings:
        ctx.warn(NOTE)
    return values
