"""The kernel's actor lane: find due alarms through the registry index and cast them."""

from __future__ import annotations

from django.utils import timezone

from kody.actors.alarms import cast_alarm, due_alarms
from kody.lanes import Cadence, LaneRun, lane


@lane("actor_alarms", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=500)
def actor_alarms(run: LaneRun) -> None:
    now = timezone.now()
    after = None
    while not run.out_of_time():
        due = due_alarms(now, after, run.batch_size)
        for alarm in due:
            cast_alarm(alarm, now)
        run.record(len(due))
        if len(due) < run.batch_size:
            break
        after = (due[-1].alarm_at, due[-1].user_id)
