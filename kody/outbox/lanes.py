"""The outbox's lane: relays whatever a lost kick or a dead relay left behind."""

from __future__ import annotations

from kody.lanes import Cadence, LaneRun, lane
from kody.outbox.core import relay


@lane("outbox_relay", cadence=Cadence.EVERY_TICK, budget_seconds=120, batch_size=100)
def outbox_relay(run: LaneRun) -> None:
    while not run.out_of_time():
        report = relay(limit=run.batch_size)
        run.record(report.handled)
        if report.handled < run.batch_size:
            break
