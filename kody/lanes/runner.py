"""Running one lane: time budget, counters, the metrics line, and lock-contention detection."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kody.lanes import registry
from kody.lanes.models import LaneCursor
from kody.lanes.registry import Lane

log = logging.getLogger("kody.lanes")

# lock_not_available, serialization_failure, deadlock_detected
CONTENTION_SQLSTATES = frozenset({"55P03", "40001", "40P01"})


class LockContention(Exception):
    """A lane lost a lock race; the task retries it with backoff."""


@dataclass
class LaneRun:
    lane: Lane
    attempt: int = 1
    started: float = field(default_factory=time.monotonic)
    batches: int = 0
    items: int = 0
    budget_exhausted: bool = False

    @property
    def batch_size(self) -> int:
        return self.lane.batch_size

    def out_of_time(self) -> bool:
        if time.monotonic() - self.started >= self.lane.budget_seconds:
            self.budget_exhausted = True
        return self.budget_exhausted

    def record(self, items: int) -> None:
        self.batches += 1
        self.items += items

    @property
    def cursor(self) -> str:
        found = LaneCursor.objects.filter(lane=self.lane.name).values_list("position", flat=True)
        return found.first() or ""

    def save_cursor(self, position: str) -> None:
        LaneCursor.objects.update_or_create(lane=self.lane.name, defaults={"position": position})

    def metrics(self, status: str) -> str:
        duration_ms = int((time.monotonic() - self.started) * 1000)
        return (
            f"lane={self.lane.name} status={status} attempt={self.attempt} "
            f"batches={self.batches} items={self.items} "
            f"budget_exhausted={str(self.budget_exhausted).lower()} duration_ms={duration_ms}"
        )


def is_lock_contention(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, LockContention):
            return True
        if getattr(current, "sqlstate", None) in CONTENTION_SQLSTATES:
            return True
        current = current.__cause__ or current.__context__
    return False


def run_lane(name: str, attempt: int = 1) -> LaneRun | None:
    """Run a lane once, logging one metrics line. Raises LockContention for the task to retry;
    other errors are logged and re-raised."""
    found = registry.get(name)
    if found is None:
        log.warning("lane=%s status=unknown (no such lane; message ignored)", name)
        return None
    run = LaneRun(found, attempt=attempt)
    if found.retired or found.fn is None:
        log.info(run.metrics("retired"))
        return run
    try:
        found.fn(run)
    except Exception as exc:
        if is_lock_contention(exc):
            log.warning(run.metrics("lock_contention"))
            raise LockContention(str(exc)) from exc
        log.exception(run.metrics("error"))
        raise
    log.info(run.metrics("ok"))
    return run
