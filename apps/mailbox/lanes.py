"""The mailbox's scheduled lane: reconcile inbound deliveries stuck mid-way (SCHEMA.md §3)."""

from __future__ import annotations

from apps.mailbox.services import reconcile
from kody.lanes import Cadence, LaneRun, lane


@lane("reconcile_inbound_deliveries", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=25)
def reconcile_inbound_deliveries(run: LaneRun) -> None:
    """25 due owners per batch (the seed's per-tick page), more batches while time remains."""
    while not run.out_of_time():
        done = reconcile.reconcile_due(run.batch_size)
        run.record(done.visited)
        if done.visited < run.batch_size:
            break
