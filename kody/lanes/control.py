"""Operator control over lanes: pause and resume in /admin/, and when each lane runs next.

* A paused lane is skipped by the dispatcher and by a ``kody.lanes.run`` message that was
  already queued; both log ``lane=NAME status=paused``. ``manage.py run_lane NAME`` runs it
  anyway: an operator running a lane by hand has decided to.
* A row whose name code no longer declares, or declares with ``retire()``, is retired: shown
  in the admin, never run, and it cannot be resumed into running.
* Skipping does not claim the lane's window, so a lane resumed after missing its hourly or
  daily window is caught up on the next tick.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from django.utils import timezone

from kody.lanes import registry
from kody.lanes.models import LaneControl
from kody.lanes.registry import Lane

TICK = timedelta(minutes=5)
# Every cadence is due at least once a day; look one day and one tick ahead.
_HORIZON_TICKS = 24 * 12 + 1


class LaneState(StrEnum):
    ENABLED = "enabled"
    PAUSED = "paused"
    RETIRED = "retired"


def sync() -> None:
    """Give every declared lane its operator row (existing rows are left as they are)."""
    rows = [LaneControl(name=item.name) for item in registry.all_lanes()]
    LaneControl.objects.bulk_create(rows, ignore_conflicts=True)


def paused_names() -> set[str]:
    return set(LaneControl.objects.filter(paused=True).values_list("name", flat=True))


def is_paused(name: str) -> bool:
    return LaneControl.objects.filter(name=name, paused=True).exists()


def state(row: LaneControl) -> LaneState:
    declared = registry.get(row.name)
    if declared is None or declared.retired:
        return LaneState.RETIRED
    return LaneState.PAUSED if row.paused else LaneState.ENABLED


def pause(names: list[str], *, by: str | None, reason: str = "") -> int:
    """Pause the named lanes that are running; the count of rows that changed. ``by`` is the
    operator's stable user id."""
    now = timezone.now()
    rows = LaneControl.objects.filter(name__in=names, paused=False)
    return rows.update(
        paused=True, paused_at=now, paused_by_user_id=by, pause_reason=reason, updated_at=now
    )


def resume(names: list[str]) -> int:
    rows = LaneControl.objects.filter(name__in=names, paused=True)
    return rows.update(
        paused=False,
        paused_at=None,
        paused_by_user_id=None,
        pause_reason="",
        updated_at=timezone.now(),
    )


def next_tick(now: datetime) -> datetime:
    """The first beat tick (every five minutes, on the clock) after ``now``."""
    floor = now.replace(minute=now.minute - now.minute % 5, second=0, microsecond=0)
    return floor + TICK


def next_window(
    item: Lane,
    now: datetime,
    *,
    last_started: datetime | None = None,
    last_dispatched: datetime | None = None,
) -> datetime | None:
    """The tick at which the dispatcher will next enqueue ``item`` (None if it never will)."""
    if item.retired:
        return None
    tick = next_tick(now)
    for _ in range(_HORIZON_TICKS):
        if item.is_due(tick) or registry.missed_window(item, tick, last_started):
            start = registry.window_start(item.cadence, tick)
            if start is None or last_dispatched is None or last_dispatched < start:
                return tick
        tick += TICK
    return None
