"""System mail's scheduled lane: hourly retention of the operator inbox."""

from __future__ import annotations

from apps.system_email.services import retention
from kody.lanes import Cadence, LaneRun, lane


@lane("system_email_retention", cadence=Cadence.HOURLY, budget_seconds=120, batch_size=200)
def system_email_retention(run: LaneRun) -> None:
    while not run.out_of_time():
        batch = retention.prune_batch(run.batch_size)
        run.record(batch.total)
        if batch.messages + batch.blob_failures < run.batch_size and batch.total < run.batch_size:
            break
