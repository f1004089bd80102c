"""The operator's view of the system, content-free: counts, versions, queue depths, lane runs.

Nothing here reads user content or names a user; every figure is an aggregate. Each section is
collected on its own and fails soft: a section that cannot be read says so (with the exception
class only) and the others still report.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import redis
from django.conf import settings
from django.core.files.storage import storages
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Count, Min, Q
from django.utils import timezone

from config.buckets import BUCKETS
from kody.actors import transport
from kody.dr.export import night_of

log = logging.getLogger("kody.health")

Section = dict[str, Any]

# Kombu's Redis transport keeps one list per priority step: the bare queue name for priority 0
# and ``<queue>\x06\x16<step>`` for the others (kombu.transport.redis, default priority_steps).
_KOMBU_PRIORITY_SEP = "\x06\x16"
_KOMBU_PRIORITY_STEPS = (0, 3, 6, 9)
CELERY_QUEUES = ("default",)
_BROKER_TIMEOUT_SECONDS = 2.0


def _soft(collect: Callable[[], Section]) -> Section:
    try:
        return {"available": True, **collect()}
    except Exception as exc:
        log.warning(
            "health section %s unavailable (%s)",
            getattr(collect, "__name__", "database"),
            type(exc).__name__,
        )
        return {"available": False, "error": type(exc).__name__}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


# --- databases ------------------------------------------------------------------------------


def _database(alias: str) -> Section:
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return {"server_version": version, "pending_migrations": len(plan)}


def databases() -> Section:
    return {
        "databases": {alias: _soft(functools.partial(_database, alias)) for alias in connections}
    }


# --- per-user schemas -----------------------------------------------------------------------


def user_schemas() -> Section:
    from kody.userschema import schema_version
    from kody.userschema.models import UserSchema

    now = timezone.now()
    current = schema_version()
    rows = UserSchema.objects.values("version").annotate(n=Count("user_id")).order_by("version")
    by_version = {row["version"]: row["n"] for row in rows}
    alarms = UserSchema.objects.aggregate(
        due=Count("user_id", filter=Q(alarm_at__lte=now)),
        oldest=Min("alarm_at", filter=Q(alarm_at__lte=now)),
    )
    oldest = alarms["oldest"]
    return {
        "current_version": current,
        "total": sum(by_version.values()),
        "by_version": [
            {"version": version, "count": n, "needs_upgrade": version < current}
            for version, n in by_version.items()
        ],
        "needs_upgrade": sum(n for version, n in by_version.items() if version < current),
        "due_alarms": alarms["due"],
        "oldest_due_alarm_age_seconds": int((now - oldest).total_seconds()) if oldest else None,
    }


# --- broker queues --------------------------------------------------------------------------


@functools.cache
def _client(url: str) -> redis.Redis | redis.RedisCluster:
    # Same URL and keys as the shard transport (a cluster client for ``redis+cluster://``),
    # but bounded timeouts: the transport's client waits forever on purpose (BLPOP), and a
    # health page must not hang on a stuck broker.
    return transport.connect(
        url, socket_timeout=_BROKER_TIMEOUT_SECONDS, socket_connect_timeout=_BROKER_TIMEOUT_SECONDS
    )


def broker_client() -> redis.Redis | redis.RedisCluster:
    return _client(transport.redis_url())


def _kombu_lists(queue: str) -> list[str]:
    return [
        queue if step == 0 else f"{queue}{_KOMBU_PRIORITY_SEP}{step}"
        for step in _KOMBU_PRIORITY_STEPS
    ]


def queues() -> Section:
    from kody.actors import reshard

    client = broker_client()
    shards = reshard.states(range(settings.KODY_ACTOR_SHARDS), client)
    pipe = client.pipeline(transaction=False)
    for name in CELERY_QUEUES:
        for key in _kombu_lists(name):
            pipe.llen(key)
    replies = pipe.execute()
    steps = len(_KOMBU_PRIORITY_STEPS)
    celery = [
        {"queue": name, "depth": sum(replies[i * steps : (i + 1) * steps])}
        for i, name in enumerate(CELERY_QUEUES)
    ]
    return {
        "shards": [each.row() for each in shards],
        "celery": celery,
        # Calls on shards beyond the count (left by lowering it), which no worker drains: the
        # operator moves them with ``manage.py move_stranded_shards``.
        "stranded": [each.row() for each in reshard.stranded(client)],
    }


# --- lanes ----------------------------------------------------------------------------------


def lanes() -> Section:
    from kody.lanes import control, registry
    from kody.lanes.models import LaneRunRecord

    declared = registry.all_lanes()
    paused = control.paused_names()
    records = {r.lane: r for r in LaneRunRecord.objects.filter(lane__in=[x.name for x in declared])}
    rows = []
    for item in declared:
        record = records.get(item.name)
        rows.append(
            {
                "name": item.name,
                "cadence": item.cadence.value,
                "retired": item.retired,
                "paused": item.name in paused,
                "budget_seconds": item.budget_seconds,
                "last_started_at": _iso(record.last_started_at) if record else None,
                "last_finished_at": _iso(record.last_finished_at) if record else None,
                "last_status": (record.last_status or None) if record else None,
                "last_items": record.last_items if record else None,
                "last_batches": record.last_batches if record else None,
                "last_duration_ms": record.last_duration_ms if record else None,
                "last_budget_exhausted": record.last_budget_exhausted if record else None,
                "last_error_class": (record.last_error_class or None) if record else None,
                "consecutive_failures": record.consecutive_failures if record else 0,
                "total_runs": record.total_runs if record else 0,
            }
        )
    return {"lanes": rows}


# --- blob buckets ---------------------------------------------------------------------------


def _backend(name: str) -> Section:
    storage = storages[name]
    is_s3 = hasattr(storage, "bucket_name")
    cls = type(storage)
    return {
        "bucket": name,
        "backend": "s3" if is_s3 else "filesystem",
        "class": f"{cls.__module__}.{cls.__qualname__}",
    }


def blobs() -> Section:
    # Configuration only: a bucket is never listed or touched here.
    return {"buckets": [_backend(name) for name in BUCKETS]}


# --- disaster-recovery export -------------------------------------------------------------


def dr_export() -> Section:
    """Tonight's export from the lane's own records (the bucket is not touched): ``red`` when
    the watchdog found the summary missing, ``ok`` once written, else ``pending``."""
    from kody.lanes.models import LaneCursor, LaneRunRecord

    night = night_of(timezone.now()).isoformat()
    position = LaneCursor.objects.filter(lane="dr_export").values_list("position", flat=True)
    try:
        finished = json.loads(position.first() or "{}").get("finished")
    except (ValueError, AttributeError):
        finished = None
    watchdog = LaneRunRecord.objects.filter(lane="dr_export_watchdog").first()
    failing = bool(watchdog and watchdog.consecutive_failures)
    status = "red" if failing and finished != night else ("ok" if finished == night else "pending")
    return {"night": night, "last_finished_night": finished, "status": status}


# --- the whole report -----------------------------------------------------------------------

SECTIONS: dict[str, Callable[[], Section]] = {
    "databases": databases,
    "user_schemas": user_schemas,
    "queues": queues,
    "lanes": lanes,
    "blobs": blobs,
    "dr_export": dr_export,
}


def report() -> dict[str, Any]:
    return {
        "generated_at": _iso(timezone.now()),
        "actor_shards": settings.KODY_ACTOR_SHARDS,
        **{name: _soft(collect) for name, collect in SECTIONS.items()},
    }
