"""The packages domain's scheduled lanes."""

from __future__ import annotations

from apps.packages.services import memories
from kody.lanes import Cadence, LaneRun, lane


@lane("packages_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1000)
def packages_retention(run: LaneRun) -> None:
    """Memory conversation suppressions: expired and unseen for 90 days (seed 000)."""
    while not run.out_of_time():
        deleted = memories.prune_suppressions(batch=run.batch_size)
        run.record(deleted)
        if deleted < run.batch_size:
            break
