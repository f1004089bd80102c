"""Usage telemetry: append-only ``usage_events`` and the monthly ``usage_rollups`` read model.

``usage_events`` replaces the original's Analytics Engine dataset: it is written, never read
on a request path, and kept for ``USAGE_EVENT_RETENTION_DAYS``. Metered actions do not write
it directly: they append to a Redis list (one RPUSH, no Postgres statement on the hot path)
that the hourly rollup drains first, in batches, into the table. The hourly rollup recomputes
whole months from it (absolute values, so a rerun or an overlapping run is harmless), which
is why events must outlive the previous month: 90 days covers it with room to spare.

The buffer is drained exactly once per event, though several lanes drain it at once and a
drainer may die anywhere:

* every buffered event carries its own id (``event_key``, unique in the table), and the insert
  skips ids already there, so inserting a batch twice adds nothing;
* a drainer moves its batch out of the buffer into its own processing list in one script
  (``_TAKE``), inserts it, and only then deletes that list, so no other drainer sees the batch
  and a crash leaves the batch in Redis, never nowhere;
* a processing list older than ``STALE_AFTER`` belongs to a dead drainer: the next drain claims
  it (``_CLAIM``, one script, so two drains do not both take it) and inserts it again.

All keys share the hash tag ``{kody:usage-events}``: the scripts touch several of them and
run unchanged on a single Redis or on Redis Cluster.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.db import connection, transaction
from django.utils import timezone
from django_redis import get_redis_connection

from apps.entitlements.models import UsageEvent, UsageRollup

if TYPE_CHECKING:
    from redis import Redis

log = logging.getLogger(__name__)

USAGE_EVENT_RETENTION_DAYS = 90
# Metered actions append here; the hourly ``usage_aggregation`` lane drains it into the table.
KEY_TAG = "{kody:usage-events}"
BUFFER_KEY = f"{KEY_TAG}:buffer"
# Drainer token -> when it took its batch (epoch seconds): finds a dead drainer's batch.
DRAINERS_KEY = f"{KEY_TAG}:drainers"
# A live drain inserts a batch in seconds; a batch held this long has lost its drainer.
STALE_AFTER = timedelta(minutes=10)
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
    identity: str | None = None,
) -> None:
    """Append ``count`` events (one per unit charged) to the Redis buffer: one RPUSH, no
    Postgres statement on the metered path. Content-free: who, what, when, sizes. Telemetry
    is best effort: a Redis error is logged, never raised into the metered action.

    ``identity`` names what happened (e.g. one applied charge): recording the same identity
    again yields the same event ids, so the table keeps one copy. Without it each call is new."""
    when = (at or timezone.now()).astimezone(UTC).isoformat()
    named = f"kody:usage:{stable_user_id}:{metric}:{identity}"
    base = uuid.uuid5(uuid.NAMESPACE_URL, named) if identity else uuid.uuid4()
    entries = [
        json.dumps(
            [str(uuid.uuid5(base, str(unit))), stable_user_id, metric[:64], when]
            + [duration_ms, cpu_ms, size_bytes, error]
        )
        for unit in range(max(1, count))
    ]
    try:
        get_redis_connection("default").rpush(BUFFER_KEY, *entries)
    except Exception as exc:  # noqa: BLE001 - a telemetry outage must not fail the charge
        log.warning("usage event for %s not buffered (%s)", metric, type(exc).__name__)


def _event(entry: bytes | str) -> UsageEvent | None:
    try:
        key, uid, metric, when, duration_ms, cpu_ms, size, error = json.loads(entry)
        return UsageEvent(
            event_key=uuid.UUID(key),
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


# Move up to ARGV[1] entries from the buffer's head to this drainer's processing list and note
# when (ARGV[3]) the drainer (ARGV[2]) took them. In chunks: ``unpack`` has a stack limit.
_TAKE = """
local items = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #items == 0 then return 0 end
redis.call('LTRIM', KEYS[1], #items, -1)
for i = 1, #items, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(items, i, math.min(i + 999, #items)))
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
return #items
"""
# Claim up to ARGV[3] drainers that took their batch before ARGV[1], stamping them ARGV[2] so
# a concurrent drain does not claim them too.
_CLAIM = """
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, token in ipairs(stale) do redis.call('ZADD', KEYS[1], ARGV[2], token) end
return stale
"""


def _processing_key(token: str) -> str:
    return f"{KEY_TAG}:processing:{token}"


def _insert(raw: list[bytes | str]) -> int:
    rows = [row for row in map(_event, raw) if row is not None]
    with transaction.atomic():
        UsageEvent.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _finish(client: Redis, token: str) -> None:
    """Forget a batch that is in the table. Inside a caller's transaction only once it
    commits: a rollback leaves the batch for the stale-batch recovery."""

    def forget() -> None:
        pipe = client.pipeline(transaction=True)
        pipe.delete(_processing_key(token))
        pipe.zrem(DRAINERS_KEY, token)
        pipe.execute()

    transaction.on_commit(forget)


def _recover_stale(client: Redis, now: datetime, limit: int = 100) -> int:
    stamp = now.timestamp()
    cutoff = stamp - STALE_AFTER.total_seconds()
    tokens = client.eval(_CLAIM, 1, DRAINERS_KEY, cutoff, stamp, limit)
    moved = 0
    for token in (t.decode() if isinstance(t, bytes) else str(t) for t in tokens):
        moved += _insert(client.lrange(_processing_key(token), 0, -1))
        _finish(client, token)
    return moved


def _take(client: Redis, token: str, batch: int, now: datetime) -> list[bytes | str]:
    keys = (BUFFER_KEY, _processing_key(token), DRAINERS_KEY)
    if not client.eval(_TAKE, 3, *keys, batch, token, now.timestamp()):
        return []
    return list(client.lrange(_processing_key(token), 0, -1))


def drain_buffer(batch: int = 5000, *, max_batches: int = 200) -> int:
    """Move buffered events into ``usage_events``, each exactly once (see the module note):
    first the batches of drainers that died holding one, then the buffer, batch by batch.
    Returns the rows handed to the insert (a recovered batch may repeat rows already in)."""
    client = get_redis_connection("default")
    now = timezone.now()
    moved = _recover_stale(client, now)
    for _ in range(max_batches):
        token = uuid.uuid4().hex
        raw = _take(client, token, batch, now)
        if not raw:
            break
        moved += _insert(raw)
        _finish(client, token)
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
