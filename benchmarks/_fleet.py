"""The fleet benchmark's building blocks (``benchmarks/fleet.py``): a fleet of users with the
product's mix of activity, and what is timed over it — warm and cold calls, fleet upgrades,
restores of hibernated users — plus the catalog's size.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

DAY = "2000-01-01"  # a fixed day: nothing measured depends on the calendar
MIX = (("mail", 0.10), ("runs", 0.05), ("storage", 0.05))


def _consume(user: str) -> None:
    from apps.entitlements.actor import UserMeter

    UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=10**9)


def _activities() -> dict[str, Callable[[str], object]]:
    from apps.jobs.actor import RunLog, StorageRunner
    from apps.mailbox.actor import Mailbox

    return {
        "mail": lambda user: Mailbox.call(user, "count"),
        "runs": lambda user: RunLog.call(user, "export_runs"),
        "storage": lambda user: StorageRunner.call(user, "export_storage"),
    }


def drop_user_schemas() -> None:
    from django.db import connection

    from kody.userschema.naming import like_pattern
    from kody.userschema.schemas import known

    with connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [like_pattern()])
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        cursor.execute("DELETE FROM kody_user_schemas")
    known.clear()


def catalog() -> tuple[int, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), pg_database_size(current_database()) FROM pg_class")
        rows, size = cursor.fetchone()
    return rows, size


def grow(users: list[str], rng: random.Random) -> None:
    activities = _activities()
    for user in users:
        _consume(user)
        for name, share in MIX:
            if rng.random() < share:
                activities[name](user)


def serve_everyone(users: list[str], recycle: bool) -> tuple[float, int]:
    """A fresh connection calls every user once (recycled like a shard consumer when asked);
    returns its backend memory in MB at the end and how often it was recycled."""
    from django.db import connection

    from kody.actors.recycle import Recycler, backend_memory_bytes

    connection.close()
    recycler = Recycler()
    for user in users:
        _consume(user)
        if recycle:
            recycler.after_batch([user])
    return backend_memory_bytes() / 2**20, recycler.recycled


def timed_calls(users: list[str], count: int, rng: random.Random, cold: bool) -> list[float]:
    from django.db import connection

    samples = []
    for _ in range(count):
        user = rng.choice(users)
        if cold:
            connection.close()
            connection.ensure_connection()
        start = time.perf_counter()
        _consume(user)
        samples.append(time.perf_counter() - start)
    return samples


def upgrade_per_schema(users: list[str], count: int, rng: random.Random) -> float:
    from django.db import connection

    from kody.userschema.schemas import known, upgrade_schema

    sample = rng.sample(users, min(count, len(users)))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kody_user_schemas SET version = 1 WHERE user_id = ANY(%s)", [sample])
    for user in sample:
        known.forget(user)
    start = time.perf_counter()
    for user in sample:
        upgrade_schema(user)
    return (time.perf_counter() - start) / len(sample)


def restore_times(users: list[str], count: int, rows: int) -> tuple[list[float], list[float]]:
    """Hibernate ``count`` users holding ``rows`` meter rows each, then time each restore:
    once with no spare schema, once with one spare each (``kody.userschema.spares``)."""
    from datetime import date, timedelta

    from django.db import connection

    from kody.userschema.hibernation import hibernate_schema, restore_schema
    from kody.userschema.naming import schema_name_for

    chosen = users[:count]
    with connection.cursor() as cursor:
        for user in chosen:
            cursor.execute(
                f'INSERT INTO "{schema_name_for(user)}".daily_counters (resource, day, count)'
                " SELECT 'bench_' || n, DATE '2000-01-02' + n, n FROM generate_series(1, %s) n",
                [rows],
            )
    from kody.userschema import spares

    rounds = []
    for pool in (0, len(chosen)):  # from the DDL, then each from a spare built ahead
        for user in chosen:
            hibernate_schema(user, date.today() + timedelta(days=1))
        spares.drop_all()
        spares.top_up(pool)
        samples = []
        for user in chosen:
            start = time.perf_counter()
            restore_schema(user)
            samples.append(time.perf_counter() - start)
        rounds.append(samples)
    spares.drop_all()
    return rounds[0], rounds[1]
