"""Scheduled lanes owned by accounts."""

from __future__ import annotations

from apps.accounts.services import audit
from kody.lanes import Cadence, LaneRun, lane


@lane("audit_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1000)
def audit_retention(run: LaneRun) -> None:
    """Drop audit_events older than 180 days, oldest first, in bounded batches."""
    while not run.out_of_time():
        deleted = audit.prune_expired(run.batch_size)
        run.record(deleted)
        if deleted < run.batch_size:
            break
