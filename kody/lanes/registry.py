"""The lane registry: every scheduled sweep, declared by the app that owns it in ``lanes.py``.

from kody.lanes import Cadence, LaneRun, lane

@lane("retention", cadence=Cadence.HOURLY, budget_seconds=120, batch_size=500)
def retention(run: LaneRun) -> None:
    while not run.out_of_time():
        deleted = prune_some(limit=run.batch_size)
        run.record(deleted)
        if deleted < run.batch_size:
            break

retire("repo_session_index_backfill")   # the name stays so queued messages still parse
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kody.lanes.runner import LaneRun

LaneFunction = Callable[["LaneRun"], None]

log = logging.getLogger("kody.lanes")


class Cadence(StrEnum):
    EVERY_TICK = "every_tick"
    HOURLY = "hourly"  # the tick in minutes 0-4 of each hour, UTC
    DAILY = "daily"  # the tick in 03:00-03:04 UTC
    # Every tick in 00:30-06:09 UTC, and every quarter hour otherwise (a missed night catches up).
    NIGHTLY_WINDOW = "nightly_window"
    MORNING_CHECK = "morning_check"  # the tick in 06:15-06:19 UTC
    RETIRED = "retired"


@dataclass(frozen=True)
class Lane:
    name: str
    cadence: Cadence
    fn: LaneFunction | None
    budget_seconds: float = 60.0
    batch_size: int = 500

    @property
    def retired(self) -> bool:
        return self.cadence is Cadence.RETIRED

    def is_due(self, now: datetime) -> bool:
        return is_due(self.cadence, now)


def is_due(cadence: Cadence, now: datetime) -> bool:
    if now.utcoffset():
        raise ValueError("lane cadences are evaluated in UTC")
    if cadence is Cadence.EVERY_TICK:
        return True
    if cadence is Cadence.HOURLY:
        return now.minute < 5
    if cadence is Cadence.DAILY:
        return now.hour == 3 and now.minute < 5
    if cadence is Cadence.NIGHTLY_WINDOW:
        return 30 <= now.hour * 60 + now.minute < 6 * 60 + 10 or now.minute % 15 < 5
    if cadence is Cadence.MORNING_CHECK:
        return now.hour == 6 and 15 <= now.minute < 20
    return False


_lanes: dict[str, Lane] = {}


def register(new: Lane) -> Lane:
    existing = _lanes.get(new.name)
    if existing is not None and existing != new and not _same_function(existing, new):
        raise ValueError(f"lane {new.name!r} is declared twice")
    _lanes[new.name] = new
    return new


def _same_function(a: Lane, b: Lane) -> bool:
    names = [f"{lane.fn.__module__}.{lane.fn.__qualname__}" if lane.fn else "" for lane in (a, b)]
    return names[0] == names[1]


def lane(
    name: str, *, cadence: Cadence, budget_seconds: float = 60.0, batch_size: int = 500
) -> Callable[[LaneFunction], LaneFunction]:
    if cadence is Cadence.RETIRED:
        raise ValueError("use retire(name) for a retired lane")

    def declare(fn: LaneFunction) -> LaneFunction:
        register(Lane(name, cadence, fn, budget_seconds, batch_size))
        return fn

    return declare


def retire(name: str) -> None:
    register(Lane(name, Cadence.RETIRED, None))


def get(name: str) -> Lane | None:
    autodiscover()
    return _lanes.get(name)


def all_lanes() -> list[Lane]:
    autodiscover()
    return sorted(_lanes.values(), key=lambda item: item.name)


def window_start(cadence: Cadence, now: datetime) -> datetime | None:
    """Start of the latest hourly/daily window at or before ``now`` (None for other cadences)."""
    if cadence is Cadence.HOURLY:
        return now.replace(minute=0, second=0, microsecond=0)
    if cadence is Cadence.DAILY:
        today = now.replace(hour=3, minute=0, second=0, microsecond=0)
        return today if now >= today else today - timedelta(days=1)
    if cadence is Cadence.MORNING_CHECK:
        today = now.replace(hour=6, minute=15, second=0, microsecond=0)
        return today if now >= today else today - timedelta(days=1)
    return None


def missed_window(item: Lane, now: datetime, last_started: datetime | None) -> bool:
    """A lane that has run before but not since its latest window opened: beat was down or
    late for that window's tick. A lane that never ran waits for its first window instead."""
    start = window_start(item.cadence, now)
    return start is not None and last_started is not None and last_started < start


def due_lanes(
    now: datetime, last_started: Mapping[str, datetime | None] | None = None
) -> list[Lane]:
    """Lanes due at ``now``; with ``last_started`` (lane → last start), also the lanes whose
    latest window was missed."""
    last_started = last_started or {}
    return [
        item
        for item in all_lanes()
        if item.is_due(now) or missed_window(item, now, last_started.get(item.name))
    ]


def autodiscover() -> None:
    # Lanes register as their modules import (kody.discovery, at start-up); imported here
    # because those modules import this registry.
    from kody.discovery import autodiscover as discover_all

    discover_all()
