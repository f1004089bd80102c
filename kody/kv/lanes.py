from __future__ import annotations

from kody.kv.store import purge_expired
from kody.lanes import Cadence, LaneRun, lane


@lane("kv_expired", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1000)
def kv_expired(run: LaneRun) -> None:
    while not run.out_of_time():
        deleted = purge_expired(run.batch_size)
        run.record(deleted)
        if deleted < run.batch_size:
            break
