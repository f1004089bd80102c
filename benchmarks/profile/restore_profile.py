"""Where a restore's time goes: per-statement timings of restoring hibernated users.

    python benchmarks/profile/restore_profile.py [--users 20] [--rows 1000] [--padding 0]

``--padding N`` first creates N more user schemas (the catalog a real fleet has)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for its helpers

import argparse
import os
import time
from collections import defaultdict
from datetime import date, timedelta

os.environ.setdefault("KODY_TEST_DB_SUFFIX", "_restore")

from _accounts import live_account_ids  # noqa: E402
from _harness import pct, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--padding", type=int, default=0)
    options = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django.db import connection

    from apps.entitlements.actor import UserMeter
    from kody.userschema.hibernation import hibernate_schema, restore_schema
    from kody.userschema.naming import schema_name_for

    settings.KODY_ACTORS_INLINE = True
    users = live_account_ids(options.users + options.padding)
    for user in users:
        UserMeter.call(
            user, "consume", resource="execute_calls_per_day", day="2000-01-01", limit=10**9
        )
    chosen = users[: options.users]
    with connection.cursor() as cursor:
        for user in chosen:
            cursor.execute(
                f'INSERT INTO "{schema_name_for(user)}".daily_counters (resource, day, count)'
                " SELECT 'bench_' || n, DATE '2000-01-02' + n, n FROM generate_series(1, %s) n",
                [options.rows],
            )
    for user in chosen:
        hibernate_schema(user, date.today() + timedelta(days=1))
    spent: dict[str, list[float]] = defaultdict(list)

    def timer(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent[sql.split("\n")[0][:70]].append(time.perf_counter() - start)

    from kody.userschema import hibernation

    def timed(name, fn):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name].append(time.perf_counter() - start)

        return wrapper

    hibernation.pipelined = timed("pipelined (DDL / indexes + registry)", hibernation.pipelined)
    hibernation._copy_in = timed("COPY FROM STDIN", hibernation._copy_in)
    original_commit = connection.commit
    connection.commit = timed("COMMIT", original_commit)
    totals = []
    with connection.execute_wrapper(timer):
        for user in chosen:
            start = time.perf_counter()
            restore_schema(user)
            totals.append(time.perf_counter() - start)
    print(f"restore: p50 {pct(totals, 0.5) * 1000:.1f} ms, p99 {pct(totals, 0.99) * 1000:.1f} ms")
    for sql, times in sorted(spent.items(), key=lambda kv: -sum(kv[1])):
        each = sum(times) / len(chosen) * 1000
        print(f"  {each:7.2f} ms/restore  x{len(times) / len(chosen):.0f}  {sql}")
    with connection.cursor() as cursor:
        for user in users:
            cursor.execute(f'DROP SCHEMA IF EXISTS "{schema_name_for(user)}" CASCADE')
        cursor.execute("DELETE FROM kody_user_schemas")
        cursor.execute("DELETE FROM kody_schema_archives")


if __name__ == "__main__":
    main()
