"""The UserMeter actor: daily entitlement counters, one writer per user.

Only the daily counter lives here so far; inbound-delivery claims, storage bytes, package
service states and write leases join it as the meter grows (SCHEMA.md §2.1).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from apps.entitlements.actor.models import DailyCounter
from kody.actors import Actor

RESOURCES = frozenset(
    {
        "email_sends_per_day",
        "email_receives_per_day",
        "execute_calls_per_day",
        "outbound_fetches_per_day",
        "job_runs_per_day",
    }
)
RETENTION_DAYS = 7
TABLE = DailyCounter._meta.db_table


class UnknownResource(ValueError):
    pass


def _day(value: str) -> date:
    return date.fromisoformat(value)


def _reading(resource: str, day: date, allowed: bool, count: int, revision: int, limit: int) -> dict[str, Any]:
    return {
        "resource": resource,
        "day": day.isoformat(),
        "allowed": allowed,
        "count": count,
        "limit": limit,
        "remaining": max(limit - count, 0),
        "revision": revision,
    }


class UserMeter(Actor):
    name = "entitlements.UserMeter"

    def consume(self, resource: str, day: str, limit: int, amount: int = 1) -> dict[str, Any]:
        """Charge ``amount`` if it fits under ``limit``; the reading is post-charge when allowed."""
        if resource not in RESOURCES:
            raise UnknownResource(resource)
        if amount < 1 or limit < 0:
            raise ValueError("amount must be positive and limit non-negative")
        when = _day(day)
        with connection.cursor() as cursor:
            charged = self._charge(cursor, resource, when, limit, amount)
            if charged is None and self._bootstrap(cursor, resource, when):
                charged = self._charge(cursor, resource, when, limit, amount)
            if charged is not None:
                return _reading(resource, when, True, charged[0], charged[1], limit)
        count, revision = self._current(resource, when)
        return _reading(resource, when, False, count, revision, limit)

    def read(self, resource: str, day: str) -> dict[str, Any]:
        when = _day(day)
        count, revision = self._current(resource, when)
        return {"resource": resource, "day": when.isoformat(), "count": count, "revision": revision}

    def alarm(self) -> None:
        self.prune()

    def prune(self) -> int:
        cutoff = timezone.now().date() - timedelta(days=RETENTION_DAYS)
        deleted, _ = DailyCounter.objects.filter(day__lt=cutoff).delete()
        return deleted

    def _charge(self, cursor: Any, resource: str, when: date, limit: int, amount: int) -> tuple[int, int] | None:
        cursor.execute(
            f"UPDATE {TABLE} SET count = count + %s, revision = revision + 1, updated_at = now()"
            " WHERE resource = %s AND day = %s AND count + %s <= %s RETURNING count, revision",
            [amount, resource, when, amount, limit],
        )
        return cursor.fetchone()

    def _bootstrap(self, cursor: Any, resource: str, when: date) -> bool:
        """Cold start of a (resource, day): create the zero row; prune old days once a day."""
        cursor.execute(
            f"INSERT INTO {TABLE} (resource, day, count, revision, updated_at)"
            " VALUES (%s, %s, 0, 0, now()) ON CONFLICT DO NOTHING",
            [resource, when],
        )
        created = cursor.rowcount == 1
        if created:
            self.prune()
        return created

    def _current(self, resource: str, when: date) -> tuple[int, int]:
        found = DailyCounter.objects.filter(resource=resource, day=when)
        row = found.values_list("count", "revision").first()
        return (row[0], row[1]) if row else (0, 0)
