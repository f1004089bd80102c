"""The retention loop every pruning lane shares, and the manifest of growing tables.

A lane hands ``run_policies`` its ``LaneRun`` and a list of ``Policy`` (a table and a function
deleting at most one batch, returning how many rows went). The loop runs round-robin passes:
every pending table gets one batch before any table gets a second one, a table leaves the
rotation once a batch comes back short, and the loop stops when every table is drained or the
time budget (``RETENTION_BUDGET_SECONDS``) is spent — but the first pass always completes, so a
hot table cannot starve the others. One log line per run reports batches per table.

``GROWING_TABLES`` names every table that grows with use (seed 000's "Growth and retention
policies"); each is in exactly one of ``POLICIES`` (the lane that prunes it), ``EXEMPT`` (why
no time-based prune) or ``PENDING`` (a lane the seed names that is not built yet).
``tests/jobs/test_retention.py`` holds the manifest to the migrated tables and the registered
lanes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("kody.retention")

RETENTION_BUDGET_SECONDS = 20.0


@dataclass(frozen=True)
class Policy:
    table: str
    prune: Callable[[int], int]  # (batch size) -> rows deleted
    batch_size: int = 500
    window: str = ""  # e.g. "14/60/90 days per user"


@dataclass
class Progress:
    batches: dict[str, int]
    deleted: dict[str, int]
    budget_exhausted: bool = False

    def line(self, lane: str) -> str:
        per_table = ",".join(f"{t}:{n}" for t, n in sorted(self.batches.items()))
        return (
            f"retention-prune lane={lane} batches={per_table} deleted={sum(self.deleted.values())}"
            f" budget_exhausted={str(self.budget_exhausted).lower()}"
        )


def run_policies(
    lane: str,
    policies: Sequence[Policy],
    *,
    budget_seconds: float = RETENTION_BUDGET_SECONDS,
    record: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Progress:
    started = clock()
    progress = Progress({p.table: 0 for p in policies}, {p.table: 0 for p in policies})
    pending = list(policies)
    first_pass = True
    while pending:
        for policy in list(pending):
            if not first_pass and clock() - started >= budget_seconds:
                progress.budget_exhausted = True
                break
            deleted = policy.prune(policy.batch_size)
            progress.batches[policy.table] += 1
            progress.deleted[policy.table] += deleted
            if record is not None:
                record(deleted)
            if deleted < policy.batch_size:
                pending.remove(policy)
        first_pass = False
        if progress.budget_exhausted or (pending and clock() - started >= budget_seconds):
            progress.budget_exhausted = bool(pending)
            break
    log.info(progress.line(lane))
    return progress


def prune_oldest(rows: Any, order_by: str, batch: int) -> int:
    """Delete the first ``batch`` of ``rows`` (a queryset already filtered to what is past its
    window) in ``order_by`` order; returns how many went. Ids first, then one delete, so the
    delete is bounded whatever the filter matches."""
    ids = list(rows.order_by(order_by).values_list("pk", flat=True)[:batch])
    if not ids:
        return 0
    return int(rows.model.objects.filter(pk__in=ids).delete()[0])


# --- the manifest ---------------------------------------------------------------------------
# Seed 000's growth-pattern tables in ``public`` (per-user actor tables prune themselves inside
# their actors). Each is in exactly one of the three maps below.

# table -> the lane that prunes it
POLICIES: dict[str, str] = {
    "jobs": "job_retention",
    "archived_job_artifacts": "job_retention",
    "audit_events": "audit_retention",
    "stripe_webhook_events": "entitlements_retention",
    "usage_events": "entitlements_retention",
    "usage_rollups": "entitlements_retention",
    "mcp_memory_conversation_suppressions": "packages_retention",
    "agent_package_conversation_uses": "packages_retention",
    "published_bundle_artifacts": "packages_retention",
    "feature_flag_exposure_rollups": "accounts_retention",
    "platform_feedback": "accounts_retention",
    "system_email_messages": "system_email_retention",
    "system_email_delivery_events": "system_email_retention",
    "system_email_daily_counters": "system_email_retention",
    "system_email_threads": "system_email_retention",
    "system_email_attachments": "system_email_retention",
    "email_delivery_alert_events": "email_delivery_alert",
}

# table -> why no time-based prune
EXEMPT: dict[str, str] = {
    "mcp_memories": "durable user-curated content, removed by the user or account deletion",
    "user_usage_campaigns": "usage-state machine with sticky flags; durable until deletion",
    "user_usage_campaign_sends": "the campaign send ledger; durable until deletion",
    "user_tips_email_opt_outs": "an opt-out stamp; durable until deletion",
    "compute_overage_invoices": "one ledger row per user and month; durable until deletion",
}

# table -> the lane the seed names that nobody has built yet (an open gap, not an exemption)
PENDING: dict[str, str] = {}

GROWING_TABLES: tuple[str, ...] = tuple(sorted({*POLICIES, *EXEMPT, *PENDING}))
