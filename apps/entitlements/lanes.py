"""Entitlements' scheduled lanes: storage reconciliation, bucket estimates, usage, retention."""

from __future__ import annotations

import logging

from django.utils import timezone

from apps.entitlements.services import billing, reconcile, storage, usage
from kody.lanes import Cadence, LaneRun, lane
from kody.retention import Policy, run_policies

log = logging.getLogger(__name__)


@lane("d1_storage_reconciliation", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=200)
def d1_storage_reconciliation(run: LaneRun) -> None:
    """Recompute payload bytes for the next users after the cursor, then wrap around."""
    while not run.out_of_time():
        done = reconcile.reconcile_next(run.batch_size, out_of_time=run.out_of_time)
        run.record(done.users)
        if done.wrapped or done.users < run.batch_size:
            break


@lane(
    "storage_bucket_estimate_backfill",
    cadence=Cadence.EVERY_TICK,
    budget_seconds=60,
    batch_size=100,
)
def storage_bucket_estimate_backfill(run: LaneRun) -> None:
    while not run.out_of_time():
        measured = storage.backfill_bucket_estimates(batch=run.batch_size)
        run.record(measured)
        if measured < run.batch_size:
            break


@lane("usage_aggregation", cadence=Cadence.HOURLY, budget_seconds=300, batch_size=1)
def usage_aggregation(run: LaneRun) -> None:
    run.record(usage.roll_up_usage(timezone.now()))


@lane("entitlements_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=2000)
def entitlements_retention(run: LaneRun) -> None:
    """Round-robin: each table gets one batch per pass until all are drained or time is up."""
    run_policies(
        "entitlements_retention",
        [
            Policy(
                "stripe_webhook_events",
                lambda n: billing.prune_webhook_events(batch=n),
                run.batch_size,
                "30 days",
            ),
            Policy("usage_events", lambda n: usage.prune_usage_events(batch=n), run.batch_size),
            Policy("usage_rollups", lambda n: usage.prune_rollups(batch=n), run.batch_size),
        ],
        record=run.record,
    )
