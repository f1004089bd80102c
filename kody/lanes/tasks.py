"""The beat entry (``kody.lanes.dispatch``) and the one task every lane runs as."""

from __future__ import annotations

import logging
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.db import connection
from django.utils import timezone

from kody.lanes import control, registry
from kody.lanes.models import LaneRunRecord
from kody.lanes.runner import LockContention, run_lane

log = logging.getLogger("kody.lanes")

MAX_RETRIES = 3
QUEUE = "default"


def backoff_seconds(retries: int) -> float:
    base = settings.KODY_LANE_RETRY_BASE_SECONDS
    return min(base * (2**retries), 60.0)


_CLAIM_WINDOW = """
INSERT INTO kody_lane_runs AS r (lane, last_dispatched_at) VALUES (%s, %s)
ON CONFLICT (lane) DO UPDATE SET last_dispatched_at = EXCLUDED.last_dispatched_at
WHERE r.last_dispatched_at IS NULL OR r.last_dispatched_at < %s
RETURNING lane
"""


def _claim_window(item: registry.Lane, now: datetime) -> bool:
    """True for the one dispatch of an hourly/daily window; every-tick lanes always run."""
    start = registry.window_start(item.cadence, now)
    if start is None:
        return True
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_WINDOW, [item.name, now, start])
        return cursor.fetchone() is not None


@shared_task(name="kody.lanes.dispatch", queue=QUEUE, acks_late=True, ignore_result=True)
def dispatch(now_iso: str | None = None) -> list[str]:
    """Fired by beat every five minutes: enqueue each due lane as its own task."""
    now = datetime.fromisoformat(now_iso) if now_iso else timezone.now()
    control.sync()
    paused = control.paused_names()
    last_started = dict(LaneRunRecord.objects.values_list("lane", "last_started_at"))
    names = []
    for item in registry.due_lanes(now, last_started):
        if item.retired:
            continue
        if item.name in paused:
            # The window stays unclaimed, so resuming catches the lane up on the next tick.
            log.info("lane=%s status=paused (skipped by the dispatcher)", item.name)
            continue
        if _claim_window(item, now):
            names.append(item.name)
    for name in names:
        run.apply_async(args=[name])
    log.info("lanes dispatched at %s: %s", now.isoformat(timespec="seconds"), ",".join(names))
    return names


@shared_task(
    bind=True,
    name="kody.lanes.run",
    queue=QUEUE,
    acks_late=True,
    ignore_result=True,
    max_retries=MAX_RETRIES,
)
def run(self, name: str) -> None:  # type: ignore[no-untyped-def]
    if control.is_paused(name):
        # Queued before the operator paused it (or a retry): paused means not now.
        log.info("lane=%s status=paused (queued run skipped)", name)
        return
    try:
        run_lane(name, attempt=self.request.retries + 1)
    except LockContention as exc:
        if self.request.retries >= MAX_RETRIES:
            log.error("lane=%s gave up after %d lock-contention retries", name, MAX_RETRIES)
            return
        raise self.retry(exc=exc, countdown=backoff_seconds(self.request.retries)) from exc
    except Exception:
        # Already logged with its metrics line; the next cadence runs it again.
        return
