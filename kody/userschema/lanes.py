"""The daily hibernation lane: idle users' schemas packed into archives (``hibernation``)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from kody.lanes import Cadence, LaneRun, lane
from kody.userschema import spares
from kody.userschema.hibernation import hibernate_schema, idle_users


@lane("schema_hibernation", cadence=Cadence.DAILY, budget_seconds=600, batch_size=200)
def schema_hibernation(run: LaneRun) -> None:
    idle_before = timezone.now().date() - timedelta(days=settings.KODY_HIBERNATE_IDLE_DAYS)
    after = run.cursor
    while not run.out_of_time():
        users = idle_users(idle_before, after=after, limit=run.batch_size)
        packed = sum(1 for user in users if hibernate_schema(user, idle_before))
        run.record(packed)
        if len(users) < run.batch_size:
            run.save_cursor("")  # the pass is complete; the next day starts over
            spares.top_up()  # restores of the coming day rename these instead of running DDL
            break
        after = users[-1]
        run.save_cursor(after)
