"""Usage telemetry: append-only ``usage_events`` and the monthly ``usage_rollups`` read model.

``usage_events`` replaces the original's Analytics Engine dataset: it is written, never read
on a request path, and kept for ``USAGE_EVENT_RETENTION_DAYS``. The hourly rollup recomputes
whole months from it (absolute values, so a rerun or an overlapping run is harmless), which
is why events must outlive the previous month: 90 days covers it with room to spare.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from apps.entitlements.models import UsageEvent, UsageRollup

USAGE_EVENT_RETENTION_DAYS = 90
ROLLUP_RETENTION_MONTHS = 24
# Late events for last month can still arrive shortly after midnight on the 1st.
PREVIOUS_MONTH_GRACE = timedelta(days=2)
# Metric of a provider's outcome for one outbound message: ``email_delivery:bounced`` etc.
DELIVERY_METRIC_PREFIX = "email_delivery:"


def record_usage(
    stable_user_id: str,
    metric: str,
    *,
    duration_ms: int | None = None,
    cpu_ms: int | None = None,
    size_bytes: int | None = None,
    error: bool = False,
    at: datetime | None = None,
    count: int = 1,
) -> None:
    """Append ``count`` events (one per unit charged); content-free: who, what, when, sizes."""
    when = at or timezone.now()
    rows = [
        UsageEvent(
            user_id=stable_user_id,
            metric=metric[:64],
            occurred_at=when,
            duration_ms=duration_ms,
            cpu_ms=cpu_ms,
            bytes=size_bytes,
            error=error,
        )
        for _ in range(max(1, count))
    ]
    if len(rows) == 1:
        rows[0].save(force_insert=True)
    else:
        UsageEvent.objects.bulk_create(rows)


def month_key(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m")


def month_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def _next_month(start: datetime) -> datetime:
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)


def months_to_roll(now: datetime) -> list[datetime]:
    current = month_start(now)
    if now - current < PREVIOUS_MONTH_GRACE:
        return [month_start(current - timedelta(days=1)), current]
    return [current]


_ROLLUP_SQL = """
INSERT INTO {rollups} (user_id, metric, month, event_count, error_count,
                       total_duration_ms, total_cpu_ms, total_bytes, updated_at)
SELECT user_id, metric, %(month)s, COUNT(*), COUNT(*) FILTER (WHERE error),
       COALESCE(SUM(duration_ms), 0), COALESCE(SUM(cpu_ms), 0), COALESCE(SUM(bytes), 0), now()
FROM {events}
WHERE occurred_at >= %(start)s AND occurred_at < %(end)s
GROUP BY user_id, metric
ON CONFLICT (user_id, metric, month) DO UPDATE SET
    event_count = EXCLUDED.event_count,
    error_count = EXCLUDED.error_count,
    total_duration_ms = EXCLUDED.total_duration_ms,
    total_cpu_ms = EXCLUDED.total_cpu_ms,
    total_bytes = EXCLUDED.total_bytes,
    updated_at = EXCLUDED.updated_at
"""


def roll_up_month(start: datetime) -> int:
    sql = _ROLLUP_SQL.format(rollups=UsageRollup._meta.db_table, events=UsageEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, {"month": month_key(start), "start": start, "end": _next_month(start)})
        return cursor.rowcount


def roll_up_usage(now: datetime | None = None) -> int:
    return sum(roll_up_month(start) for start in months_to_roll(now or timezone.now()))


def oldest_kept_month(now: datetime) -> str:
    start = month_start(now)
    index = start.year * 12 + start.month - 1 - (ROLLUP_RETENTION_MONTHS - 1)
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def prune_rollups(now: datetime | None = None, *, batch: int = 5000) -> int:
    cutoff = oldest_kept_month(now or timezone.now())
    ids = list(
        UsageRollup.objects.filter(month__lt=cutoff)
        .order_by("month")
        .values_list("id", flat=True)[:batch]
    )
    return UsageRollup.objects.filter(id__in=ids).delete()[0]


def prune_usage_events(now: datetime | None = None, *, batch: int = 5000) -> int:
    cutoff = (now or timezone.now()) - timedelta(days=USAGE_EVENT_RETENTION_DAYS)
    ids = list(
        UsageEvent.objects.filter(occurred_at__lt=cutoff)
        .order_by("occurred_at")
        .values_list("id", flat=True)[:batch]
    )
    return UsageEvent.objects.filter(id__in=ids).delete()[0]


def monthly_usage(stable_user_id: str, months: int = 12) -> list[UsageRollup]:
    """Reporting read (admin, account history): the user's own rollups, newest first."""
    return list(
        UsageRollup.objects.filter(user_id=stable_user_id).order_by("-month", "metric")[
            : months * 32
        ]
    )
