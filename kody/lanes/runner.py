"""Running one lane: time budget, counters, the metrics line, and lock-contention detection."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from kody.lanes import registry
from kody.lanes.models import LaneCursor, LaneRunStatus
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
    # Lane-specific counters (``count("published")``), appended to the one metrics line.
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

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

    @property
    def duration_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def metrics(self, status: str) -> str:
        return (
            f"lane={self.lane.name} status={status} attempt={self.attempt} "
            f"batches={self.batches} items={self.items} "
            f"budget_exhausted={str(self.budget_exhausted).lower()} duration_ms={self.duration_ms}"
            + "".join(f" {name}={n}" for name, n in sorted(self.counts.items()))
        )


_RECORD_START = """
INSERT INTO kody_lane_runs (lane, last_started_at, total_runs) VALUES (%s, %s, 1)
ON CONFLICT (lane) DO UPDATE
SET last_started_at = EXCLUDED.last_started_at, total_runs = kody_lane_runs.total_runs + 1
"""

_RECORD_END = """
INSERT INTO kody_lane_runs AS r (
    lane, last_finished_at, last_status, last_items, last_batches, last_duration_ms,
    last_budget_exhausted, last_error_class, consecutive_failures
) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, CASE WHEN %s THEN 0 ELSE 1 END)
ON CONFLICT (lane) DO UPDATE SET
    last_finished_at = EXCLUDED.last_finished_at,
    last_status = EXCLUDED.last_status,
    last_items = EXCLUDED.last_items,
    last_batches = EXCLUDED.last_batches,
    last_duration_ms = EXCLUDED.last_duration_ms,
    last_budget_exhausted = EXCLUDED.last_budget_exhausted,
    last_error_class = EXCLUDED.last_error_class,
    consecutive_failures = CASE WHEN %s THEN 0 ELSE r.consecutive_failures + 1 END
"""


def _write_record(sql: str, params: list[object], lane: str) -> None:
    # The record is bookkeeping: a failed write is logged and the lane carries on. The savepoint
    # keeps a caller's transaction usable if the write fails inside one.
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    except Exception as exc:
        log.warning("lane=%s run record not written (%s)", lane, type(exc).__name__)


def record_start(run: LaneRun) -> None:
    _write_record(_RECORD_START, [run.lane.name, timezone.now()], run.lane.name)


def record_end(run: LaneRun, status: LaneRunStatus, error: BaseException | None = None) -> None:
    ok = status is LaneRunStatus.OK
    # The class name only: exception messages can quote user content.
    error_class = "" if error is None else type(error).__name__
    params = [
        run.lane.name,
        timezone.now(),
        status.value,
        run.items,
        run.batches,
        run.duration_ms,
        run.budget_exhausted,
        error_class,
        ok,
        ok,
    ]
    _write_record(_RECORD_END, params, run.lane.name)


def _contention_status(attempt: int) -> LaneRunStatus:
    from kody.lanes.tasks import MAX_RETRIES

    # The task retries attempts 1..MAX_RETRIES; the one after that gives up.
    return LaneRunStatus.RETRYING if attempt <= MAX_RETRIES else LaneRunStatus.FAILED


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
    record_start(run)
    try:
        found.fn(run)
    except Exception as exc:
        if is_lock_contention(exc):
            log.warning(run.metrics("lock_contention"))
            record_end(run, _contention_status(attempt), exc)
            raise LockContention(str(exc)) from exc
        log.exception(run.metrics("error"))
        record_end(run, LaneRunStatus.FAILED, exc)
        raise
    log.info(run.metrics("ok"))
    record_end(run, LaneRunStatus.OK)
    return run
