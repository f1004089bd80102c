"""Per-user schemas at fleet scale (issue 16): what each user costs, before and after.

    python benchmarks/fleet.py [--users 2000] [--calls 300] [--upgrades 100]

Two columns in one run, on the same server, each on a fresh set of users:

* ``before``: every table with the schema (``KODY_LAZY_ACTOR_TABLES`` off) and one
  connection that is never recycled;
* ``after``: tables only where used and the consumer's recycling at its defaults.

Users get a realistic mix: everyone is metered, 10 % got mail (a Mailbox call), 5 % ran a job
(RunLog), 5 % used storage (StorageRunner). At each step of the curve (N/4, N/2, N users) it
prints the users, catalog rows (``pg_class``), database size, the memory of a backend that has
just served every user once (``pg_backend_memory_contexts``, the shard consumer's connection —
recycled in ``after`` exactly as ``kody.actors.recycle`` does it between batches), warm call
p50/p99 (inline ``UserMeter.consume`` on random users over that warm connection), cold call
p50/p99 (a fresh connection's first call for a user) and fleet upgrade time per schema
(``upgrade_schema`` of schemas whose registry says version 1: lock, introspect, data steps);
then, in ``after``, the catalog once all but the first step's users are hibernated, and the
restore p50/p99 of hibernated users holding 1,000 meter rows each.
Calls run inline (``KODY_ACTORS_INLINE``): the queue adds the same constant to both columns.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from _accounts import live_account_ids
from _fleet import (
    catalog,
    drop_user_schemas,
    grow,
    restore_times,
    serve_everyone,
    timed_calls,
    upgrade_per_schema,
)
from _harness import pct, setup_django


def run_column(label: str, steps: list[int], options: argparse.Namespace) -> list[dict]:
    from django.conf import settings

    lazy = label == "after"
    settings.KODY_LAZY_ACTOR_TABLES = lazy
    drop_user_schemas()
    rng = random.Random(16)
    users: list[str] = []
    found = []
    for step in steps:
        started = time.perf_counter()
        new = live_account_ids(step - len(users))
        grow(new, rng)
        users += new
        grown = time.perf_counter() - started
        rows, size = catalog()
        memory, recycled = serve_everyone(users, recycle=lazy)
        warm = timed_calls(users, options.calls, rng, cold=False)
        cold = timed_calls(users, max(20, options.calls // 5), rng, cold=True)
        upgrade = upgrade_per_schema(users, options.upgrades, rng)
        result = {
            "column": label,
            "users": len(users),
            "pg_class": rows,
            "db_mb": size / 2**20,
            "backend_mb": memory,
            "recycled": recycled,
            "warm_p50": pct(warm, 0.5) * 1000,
            "warm_p99": pct(warm, 0.99) * 1000,
            "cold_p50": pct(cold, 0.5) * 1000,
            "cold_p99": pct(cold, 0.99) * 1000,
            "upgrade_ms": upgrade * 1000,
            "grow_s": grown,
        }
        print(line(result), flush=True)
        found.append(result)
    if lazy:
        # Everyone but the first step's users goes idle and hibernates: the catalog should
        # come back to about what the first step's population held (target <= 1.2x).
        from datetime import date, timedelta

        from kody.userschema.hibernation import hibernate_schema

        awake = steps[0]
        started = time.perf_counter()
        for user in users[awake:]:
            hibernate_schema(user, date.today() + timedelta(days=1))
        took = time.perf_counter() - started
        rows, size = catalog()
        print(
            f"after hibernating {len(users) - awake:,} of {len(users):,} users "
            f"({took / max(1, len(users) - awake) * 1000:.1f} ms each): {rows:,} pg_class rows, "
            f"{size / 2**20:.0f} MB = {rows / found[0]['pg_class']:.2f}x the catalog of "
            f"{awake:,} users (target <= 1.2x)",
            flush=True,
        )
    if lazy and options.restores:
        for how, restores in zip(
            ("from the DDL", "from a spare"),
            restore_times(users, options.restores, 1000),
            strict=True,
        ):
            print(
                f"restore of a hibernated user with 1,000 meter rows ({len(restores)} users, "
                f"{how}): p50 {pct(restores, 0.5) * 1000:.1f} ms, "
                f"p99 {pct(restores, 0.99) * 1000:.1f} ms (target p99 <= 100 ms)",
                flush=True,
            )
    drop_user_schemas()
    return found


HEADER = (
    "| column | users | pg_class rows | db MB | backend MB (recycles) | warm p50 / p99 ms "
    "| cold p50 / p99 ms | upgrade ms/schema |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def line(r: dict) -> str:
    return (
        f"| {r['column']} | {r['users']:,} | {r['pg_class']:,} | {r['db_mb']:.0f} "
        f"| {r['backend_mb']:.1f} ({r['recycled']}) | {r['warm_p50']:.2f} / {r['warm_p99']:.2f} "
        f"| {r['cold_p50']:.2f} / {r['cold_p99']:.2f} | {r['upgrade_ms']:.2f} |"
    )


# --- a kept fleet: built once without the quiet lock, measured (under it) as often as wanted ---

STATE = "fleet_bench_state"


def _state(key: str, value: object = None) -> object:
    import json

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {STATE} (key text PRIMARY KEY, value jsonb)")
        if value is not None:
            cursor.execute(
                f"INSERT INTO {STATE} VALUES (%s, %s) ON CONFLICT (key)"
                " DO UPDATE SET value = EXCLUDED.value",
                [key, json.dumps(value)],
            )
            return value
        cursor.execute(f"SELECT value FROM {STATE} WHERE key = %s", [key])
        row = cursor.fetchone()
    return None if row is None else (json.loads(row[0]) if isinstance(row[0], str) else row[0])


def _awake(users: list[str]) -> set[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id FROM kody_user_schemas WHERE hibernated_at IS NULL AND version > 0"
        )
        return {row[0] for row in cursor.fetchall()} & set(users)


def build_kept(size: int, options: argparse.Namespace) -> None:
    """Grow this database's fleet to ``size`` users (everything already there is kept): the
    first ``--restores`` users get 1,000 meter rows and are hibernated (the restore sample);
    with ``--hibernate-idle`` everyone past the first ``--active`` others is hibernated too."""
    from datetime import date, timedelta

    from django.db import connection

    from kody.userschema.hibernation import hibernate_schema
    from kody.userschema.naming import schema_name_for

    users: list[str] = list(_state("users") or [])
    restores: list[str] = list(_state("restore_users") or [])
    rng = random.Random(16 + len(users))
    started = time.perf_counter()
    while len(users) < size:
        new = live_account_ids(min(500, size - len(users)))
        grow(new, rng)
        users += new
        _state("users", users)
        rate = (time.perf_counter() - started) / max(1, len(users))
        print(f"  [{size}] {len(users):,} users ({rate * 1000:.1f} ms/user so far)", flush=True)
    tomorrow = date.today() + timedelta(days=1)
    if not restores:
        restores = users[: options.restores]
        with connection.cursor() as cursor:
            for user in restores:
                cursor.execute(
                    f'INSERT INTO "{schema_name_for(user)}".daily_counters (resource, day, count)'
                    " SELECT 'bench_' || n, DATE '2000-01-02' + n, n"
                    " FROM generate_series(1, 1000) n"
                )
        _state("restore_users", restores)
    for user in restores:
        hibernate_schema(user, tomorrow)
    if options.hibernate_idle:
        rest = [u for u in users if u not in set(restores)]
        idle = sorted(_awake(rest[options.active :]))
        started = time.perf_counter()
        for done, user in enumerate(idle, 1):
            hibernate_schema(user, tomorrow)
            if done % 1000 == 0:
                each = (time.perf_counter() - started) / done * 1000
                print(
                    f"  [{size}] hibernated {done:,}/{len(idle):,} ({each:.1f} ms each)", flush=True
                )
    print(f"  [{size}] built: {len(users):,} users, {len(_awake(users)):,} awake", flush=True)


def measure_kept(size: int, options: argparse.Namespace) -> dict:
    from kody.userschema.hibernation import hibernate_schema, restore_schema
    from kody.userschema.schemas import known

    users: list[str] = list(_state("users") or [])
    restores: list[str] = list(_state("restore_users") or [])
    assert len(users) >= size, f"build this fleet first: it holds {len(users)} users"
    awake = _awake(users)
    active = [u for u in users if u in awake and u not in set(restores)][: options.active]
    known.clear()
    rng = random.Random(16)
    rows, db_size = catalog()
    memory, recycled = serve_everyone(active, recycle=True)
    warm = timed_calls(active, options.calls, rng, cold=False)
    cold = timed_calls(active, max(20, options.calls // 5), rng, cold=True)
    upgrade = upgrade_per_schema(active, options.upgrades, rng)
    from datetime import date, timedelta

    from kody.userschema import spares

    timed: dict[str, list[float]] = {}
    for label, pool in (("ddl", 0), ("spare", len(restores))):
        spares.drop_all()
        spares.top_up(pool)  # untimed: the lane builds them ahead
        samples = timed[label] = []
        for user in restores:
            start = time.perf_counter()
            restore_schema(user)
            samples.append(time.perf_counter() - start)
        for user in restores:  # back to sleep for the next round and run (not timed)
            hibernate_schema(user, date.today() + timedelta(days=1))
    spares.drop_all()
    nan = float("nan")
    return {
        "column": f"kept {size:,}",
        "users": len(users),
        "awake": len(awake),
        "active": len(active),
        "pg_class": rows,
        "db_mb": db_size / 2**20,
        "backend_mb": memory,
        "recycled": recycled,
        "warm_p50": pct(warm, 0.5) * 1000,
        "warm_p99": pct(warm, 0.99) * 1000,
        "cold_p50": pct(cold, 0.5) * 1000,
        "cold_p99": pct(cold, 0.99) * 1000,
        "upgrade_ms": upgrade * 1000,
        "restore_p50": pct(timed["ddl"], 0.5) * 1000 if restores else nan,
        "restore_p99": pct(timed["ddl"], 0.99) * 1000 if restores else nan,
        "spare_p50": pct(timed["spare"], 0.5) * 1000 if restores else nan,
        "spare_p99": pct(timed["spare"], 0.99) * 1000 if restores else nan,
    }


KEPT_HEADER = (
    "| fleet | users (awake / active) | pg_class rows | db MB | backend MB (recycles) "
    "| warm p50 / p99 ms | cold p50 / p99 ms | upgrade ms/schema | restore p50 / p99 ms "
    "| restore from a spare p50 / p99 ms |\n" + "| --- " * 10 + "|"
)


def kept_line(r: dict) -> str:
    return (
        f"| {r['column']} | {r['users']:,} ({r['awake']:,} / {r['active']:,}) | {r['pg_class']:,} "
        f"| {r['db_mb']:.0f} | {r['backend_mb']:.1f} ({r['recycled']}) "
        f"| {r['warm_p50']:.2f} / {r['warm_p99']:.2f} | {r['cold_p50']:.2f} / {r['cold_p99']:.2f} "
        f"| {r['upgrade_ms']:.2f} | {r['restore_p50']:.1f} / {r['restore_p99']:.1f} "
        f"| {r['spare_p50']:.1f} / {r['spare_p99']:.1f} |"
    )


def run_kept(options: argparse.Namespace) -> None:
    """One process per fleet (each in its own kept database, ``test_kody_fleet_<N>``)."""
    import json
    import subprocess
    import sys

    results = []
    for size in options.sizes:
        env = {**os.environ, "KODY_TEST_DB_SUFFIX": f"_fleet_{size}"}
        args = [sys.executable, __file__, "--one", str(size), *sys.argv[1:]]
        done = subprocess.run(args, env=env, stdout=subprocess.PIPE, text=True, check=True)
        for text in done.stdout.splitlines():
            if text.startswith("RESULT "):
                results.append(json.loads(text[len("RESULT ") :]))
            else:
                print(text, flush=True)
    if not options.measure:
        return
    print(KEPT_HEADER)
    for result in results:
        print(kept_line(result))
    first, last = results[0], results[-1]
    print(
        f"\nwarm p50 at {last['users']:,} users / at {first['users']:,} users: "
        f"{last['warm_p50'] / first['warm_p50']:.2f}x (target <= 1.2x)"
    )
    for other in results[1:-1]:
        if other["users"] == last["active"]:
            print(
                f"catalog of {last['users']:,} users ({last['active']:,} active) / of "
                f"{other['users']:,} users: {last['pg_class'] / other['pg_class']:.2f}x "
                "(target <= 1.2x)"
            )
    print(
        f"backend memory at {last['users']:,} users: {last['backend_mb']:.1f} MB "
        f"(target <= 256 MB); restore p99 {last['restore_p99']:.1f} ms from the DDL, "
        f"{last['spare_p99']:.1f} ms from a spare (target <= 100 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=2000, help="users at the last step")
    parser.add_argument("--calls", type=int, default=300, help="warm calls timed per step")
    parser.add_argument("--upgrades", type=int, default=100, help="schemas upgraded per step")
    parser.add_argument("--restores", type=int, default=20, help="restores timed (after)")
    parser.add_argument(
        "--recycle-memory-mb",
        type=int,
        default=None,
        help="the backend memory after which the after column recycles (default: the setting)",
    )
    parser.add_argument(
        "--columns",
        default="before,after",
        help="which columns to run: 'after' alone prints the fleet's own ratios in a third of "
        "the time (the before column creates every table for every user)",
    )
    kept = parser.add_argument_group("kept fleets (each in its own database, reused across runs)")
    kept.add_argument("--sizes", type=lambda t: [int(n) for n in t.split(",")], default=None)
    kept.add_argument("--build", action="store_true", help="grow the fleets (no lock needed)")
    kept.add_argument("--measure", action="store_true", help="measure them (take the lock)")
    kept.add_argument("--active", type=int, default=1000, help="users called in a measure")
    kept.add_argument("--hibernate-idle", action="store_true", help="build: all but --active")
    kept.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.sizes and options.one is None:
        if not (options.build or options.measure):
            parser.error("--sizes needs --build and/or --measure")
        run_kept(options)
        return
    setup_django()
    from django.conf import settings

    if options.recycle_memory_mb is not None:
        settings.KODY_ACTOR_RECYCLE_MEMORY_MB = options.recycle_memory_mb

    settings.KODY_ACTORS_INLINE = True
    if options.one is not None:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        if options.build:
            build_kept(options.one, options)
        if options.measure:
            print(f"  [{options.one}] measuring, load average {load}", flush=True)
            import json

            print("RESULT " + json.dumps(measure_kept(options.one, options)), flush=True)
        return
    steps = sorted({max(1, options.users // 4), max(1, options.users // 2), options.users})
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Fleet benchmark: up to {options.users} users, {os.cpu_count()} CPUs, "
        f"load average {load}; recycle past {settings.KODY_ACTOR_RECYCLE_MEMORY_MB} MB of "
        "backend memory\n"
    )
    print(HEADER)
    recycle = settings.KODY_ACTOR_RECYCLE_MEMORY_MB
    results = {}
    columns = [c for c in ("before", "after") if c in options.columns.split(",")]
    for label in columns:
        settings.KODY_ACTOR_RECYCLE_MEMORY_MB = recycle
        results[label] = run_column(label, steps, options)
    if "after" not in results:
        return
    after, first = results["after"][-1], results["after"][0]
    print()
    if "before" in results:
        compare(results["before"][-1], after)
    print(
        f"after: warm p50 at {after['users']:,} users / at {first['users']:,} users: "
        f"{after['warm_p50'] / first['warm_p50']:.2f}x (target <= 1.2x)"
    )


def compare(before: dict, after: dict) -> None:
    print(f"at {after['users']:,} users, after / before:")
    for key, name in (
        ("pg_class", "catalog rows"),
        ("db_mb", "database size"),
        ("backend_mb", "backend memory"),
        ("warm_p50", "warm call p50"),
        ("cold_p50", "cold call p50"),
        ("upgrade_ms", "upgrade per schema"),
    ):
        print(f"  {name:22} {after[key] / before[key]:.2f}x")


if __name__ == "__main__":
    main()
