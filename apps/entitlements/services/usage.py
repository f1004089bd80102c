"""Usage telemetry: append-only ``usage_events`` and the monthly ``usage_rollups`` read model.

``usage_events`` replaces the original's Analytics Engine dataset: it is written, never read
on a request path, and kept for ``USAGE_EVENT_RETENTION_DAYS``. Metered actions do not write
it directly: they append to a Redis list (one RPUSH, no Postgres statement on the hot path)
that the hourly rollup drains first, in batches, into the table. The hourly rollup recomputes
whole months from it (absolute values, so a rerun or an overlapping run is harmless), which
is why events must outlive the previous month: 90 days covers it with room to spare.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone
from django_redis import get_redis_connection

from apps.entitlements.models import UsageEvent, UsageRollup

log = logging.getLogger(__name__)

USAGE_EVENT_RETENTION_DAYS = 90
# Metered actions append here; the hourly ``usage_aggregation`` lane drains it into the table.
BUFFER_KEY = "kody:usage-events:buffer"
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
    """Append ``count`` events (one per unit charged) to the Redis buffer: one RPUSH, no
    Postgres statement on the metered path. Content-free: who, what, when, sizes. Telemetry
    is best effort: a Redis error is logged, never raised into the metered action."""
    when = (at or timezone.now()).astimezone(UTC).isoformat()
    entry = json.dumps([stable_user_id, metric[:64], when, duration_ms, cpu_ms, size_bytes, error])
    try:
        get_redis_connection("default").rpush(BUFFER_KEY, *([entry] * max(1, count)))
    except Exception as exc:  # noqa: BLE001 - a telemetry outage must not fail the charge
        log.warning("usage event for %s not buffered (%s)", metric, type(exc).__name__)


def _event(entry: bytes) -> UsageEvent | None:
    try:
        uid, metric, when, duration_ms, cpu_ms, size, error = json.loads(entry)
        return UsageEvent(
            user_id=str(uid)[:64],
            metric=str(metric)[:64],
            occurred_at=datetime.fromisoformat(when),
            duration_ms=duration_ms,
            cpu_ms=cpu_ms,
            bytes=size,
            error=bool(error),
        )
    except (ValueError, TypeError):
        return None


def drain_buffer(batch: int = 5000, *, max_batches: int = 200) -> int:
    """Move buffered events into ``usage_events`` in batches (read, insert, then trim what was
    inserted). A crash between the insert and the trim inserts that batch again on the next
    drain: reporting-grade counts, as the original's sampled dataset was. Returns rows moved."""
    client = get_redis_connection("default")
    moved = 0
    for _ in range(max_batches):
        raw = client.lrange(BUFFER_KEY, 0, batch - 1)
        if not raw:
            break
        rows = [row for row in map(_event, raw) if row is not None]
        UsageEvent.objects.bulk_create(rows)
        client.ltrim(BUFFER_KEY, len(raw), -1)
        moved += len(rows)
        if len(raw) < batch:
            break
    return moved


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
    drain_buffer()
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
