"""What every part of the UserMeter shares: its tables, its retention window, the prune
every write path runs and the check every read path runs instead."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from django.utils import timezone

from apps.entitlements.actor import models as m

USER_METER_VERSION = 12  # the original's UserMeter schema version this meter implements
RESOURCES = frozenset(
    {
        "email_sends_per_day",
        "email_receives_per_day",
        "execute_calls_per_day",
        "outbound_fetches_per_day",
        "job_runs_per_day",
    }
)
RETENTION_DAYS = 7  # rows more than seven UTC days older than the current day are pruned
SERVICE_STATUSES = frozenset({"running", "idle", "stopped", "error"})
SERVICE_MODES = frozenset({"bounded", "persistent"})
EXPORT_PAGE_MAX = 1000

COUNTERS = m.DailyCounter._meta.db_table
CLAIMS = m.InboundDeliveryClaim._meta.db_table
STORAGE = m.StorageBytesState._meta.db_table
SERVICES = m.PackageServiceState._meta.db_table
META = m.MeterMeta._meta.db_table
DELETION = m.DeletionState._meta.db_table
LEASES = m.AccountWriteLease._meta.db_table

PRUNE = f"""
    pruned_counters AS (DELETE FROM {COUNTERS} WHERE day < %(cutoff)s),
    pruned_claims AS (DELETE FROM {CLAIMS} WHERE day < %(cutoff)s)"""

# What a read (``@reads``, which cannot delete) checks instead: is there anything to prune?
STALE = f"""(EXISTS (SELECT 1 FROM {COUNTERS} WHERE day < %(cutoff)s)
    OR EXISTS (SELECT 1 FROM {CLAIMS} WHERE day < %(cutoff)s))"""


class UnknownResource(ValueError):
    pass


def day_of(value: str) -> date:
    return date.fromisoformat(value)


def cutoff_of(day: date) -> date:
    return day - timedelta(days=RETENTION_DAYS)


def today() -> date:
    return timezone.now().date()


def resource_named(name: str) -> str:
    if name not in RESOURCES:
        raise UnknownResource(name)
    return name


def positive(amount: int) -> int:
    if not isinstance(amount, int) or amount < 1:
        raise ValueError("amount must be a positive integer")
    return amount


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


class MeterPart:
    """Helpers of the UserMeter's methods (private: not callable through the queue). The
    parts are mixed into one actor, so every method sees the same user's tables."""

    follow_up: Any

    def _prune(self, cursor: Any, day: date) -> None:
        cursor.execute(f"WITH {PRUNE} SELECT 1", {"cutoff": cutoff_of(day)})

    def _prune_reading(self, cursor: Any, day: date) -> None:
        """A read path's prune: a check, and when there are rows past the window, the prune
        asked for with ``follow_up`` (cast to the writer after a ``@reads`` call, done at once
        when the method runs as the writer) — as ``snapshot`` does in its one statement."""
        cursor.execute(f"SELECT {STALE}", {"cutoff": cutoff_of(day)})
        if cursor.fetchone()[0]:
            self.follow_up("prune", day=day.isoformat())

    def _record_version(self, cursor: Any) -> None:
        cursor.execute(
            f"INSERT INTO {META} (key, value) VALUES ('schema_version', %s)"
            f" ON CONFLICT (key) DO UPDATE SET value = GREATEST({META}.value, EXCLUDED.value)",
            [USER_METER_VERSION],
        )

    def _counts(self, cursor: Any, day: date) -> dict[str, int]:
        cursor.execute(f"SELECT resource, count FROM {COUNTERS} WHERE day = %s", [day])
        return {resource: int(count) for resource, count in cursor.fetchall()}

    def _storage(self, cursor: Any) -> tuple[int, int, datetime] | None:
        cursor.execute(f"SELECT bytes, revision, updated_at FROM {STORAGE} WHERE id = 1")
        return cursor.fetchone()
