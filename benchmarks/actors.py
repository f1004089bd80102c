"""Actor calls through the shard queue vs the same work done directly, in one run.

    python benchmarks/actors.py [--seconds 5]

Prints p50/p99 latency and calls/s for: pgbench's single-row upsert, the meter's SQL run
straight from Python, an inline actor call, one Celery task per call (the rejected design),
and call() through the queue for one user and for 64 users — then the ratios the issue asks
for. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from _accounts import live_account_ids
from _harness import (
    celery_worker,
    pg_binary,
    psql_args,
    row,
    setup_django,
    shard_worker,
    summary,
)

DAY = "2026-11-29"
LIMIT = 10**12


def closed_loop(fn: Callable[[int], object], threads: int, seconds: float) -> dict[str, float]:
    """``threads`` callers, each calling ``fn(thread_index)`` back to back for ``seconds``."""
    samples: list[list[float]] = [[] for _ in range(threads)]
    deadline = time.perf_counter() + seconds

    def run(index: int) -> None:
        mine = samples[index]
        while True:
            start = time.perf_counter()
            if start >= deadline:
                return
            fn(index)
            mine.append(time.perf_counter() - start)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return summary([s for chunk in samples for s in chunk], time.perf_counter() - started)


def _child(
    fn_factory: Callable[[], Callable[[int], object]],
    threads: int,
    seconds: float,
    offset: int,
    out: object,
) -> None:
    fn = fn_factory()
    samples: list[list[float]] = [[] for _ in range(threads)]
    deadline = time.perf_counter() + seconds

    def run(index: int) -> None:
        while (start := time.perf_counter()) < deadline:
            fn(offset + index)
            samples[index].append(time.perf_counter() - start)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put([s for chunk in samples for s in chunk])  # type: ignore[attr-defined]


def closed_loop_procs(
    fn_factory: Callable[[], Callable[[int], object]], procs: int, threads: int, seconds: float
) -> dict[str, float]:
    """Like closed_loop, from ``procs`` forked processes (callers are web workers, not threads
    of one interpreter)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    out = context.Queue()
    children = [
        context.Process(target=_child, args=(fn_factory, threads, seconds, n * threads, out))
        for n in range(procs)
    ]
    started = time.perf_counter()
    for child in children:
        child.start()
    samples = [s for _ in children for s in out.get()]
    for child in children:
        child.join()
    return summary(samples, time.perf_counter() - started)


def pgbench(seconds: float, clients: int, keys: int) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_counters (resource text, day date, count bigint,"
            " PRIMARY KEY (resource, day))"
        )
    script = (
        f"\\set k random(1, {keys})\n"
        "INSERT INTO bench_counters (resource, day, count) VALUES ('k' || :k, current_date, 1)"
        " ON CONFLICT (resource, day) DO UPDATE SET count = bench_counters.count + 1"
        " RETURNING count;\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as handle:
        handle.write(script)
        handle.flush()
        out = subprocess.run(
            [
                pg_binary("pgbench"),
                *psql_args(),
                "-n",
                "-f",
                handle.name,
                "-c",
                str(clients),
                "-j",
                str(clients),
                "-T",
                str(int(seconds)),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return float(re.search(r"tps = ([\d.]+)", out).group(1))


def raw_sql(user: str) -> Callable[[int], object]:
    import psycopg
    from django.db import connection

    from kody.userschema.naming import quoted, schema_name_for

    params = connection.get_connection_params()
    local = threading.local()
    statement = (
        "UPDATE daily_counters SET count = count + 1, revision = revision + 1, updated_at = now()"
        " WHERE resource = %s AND day = %s AND count + 1 <= %s RETURNING count, revision"
    )
    set_path = f"SET LOCAL search_path TO {quoted(schema_name_for(user))}, public"

    def call(_: int) -> object:
        if not hasattr(local, "conn"):
            local.conn = psycopg.connect(**params)
        with local.conn.transaction():
            local.conn.execute(set_path)
            return local.conn.execute(statement, ["execute_calls_per_day", DAY, LIMIT]).fetchone()

    return call


def meter_call(users: list[str]) -> Callable[[int], object]:
    from apps.entitlements.actor import UserMeter

    def call(index: int) -> object:
        user = users[index % len(users)]
        return UserMeter.call(
            user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT
        )

    return call


def mixed_call(users: list[str]) -> Callable[[int], object]:
    """Each caller alternates a meter charge and a RunLog write (a run with two log lines)
    for its user: two actors of one user, interleaved, as an agent call does."""
    from apps.entitlements.actor import UserMeter
    from apps.jobs.actor import RunLog

    turns: dict[int, int] = {}

    def call(index: int) -> object:
        user = users[index % len(users)]
        turn = turns[index] = turns.get(index, 0) + 1
        if turn % 2:
            return UserMeter.call(
                user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT
            )
        run = {"surface": "execute", "status": "running", "started_at": "2026-11-29T12:00:00+00:00"}
        lines = [{"message": "started"}, {"message": f"turn {turn}", "fields": {"turn": turn}}]
        return RunLog.call(user, "record", run, lines)

    return call


def celery_task_call() -> Callable[[int], object]:
    from benchmarks.celery_baseline import upsert

    def call(index: int) -> object:
        return upsert.apply_async(args=[f"celery{index % 64}"]).get(timeout=30)

    return call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rows",
        default="",
        help="comma-separated words; run only the rows whose label holds one of them "
        "(e.g. 'raw,inline,1 caller'); pgbench always runs",
    )
    options = parser.parse_args()
    wanted = [word.strip() for word in options.rows.split(",") if word.strip()]

    def runs(label: str) -> bool:
        return not wanted or any(word in label for word in wanted)

    setup_django()
    from django.conf import settings

    from apps.entitlements.actor import UserMeter
    from kody.actors.topology import worker_processes
    from kody.userschema.schemas import ensure_schema

    seconds = options.seconds
    one, *many = live_account_ids(65)
    for user in [one, *many]:
        ensure_schema(user)
        settings.KODY_ACTORS_INLINE = True
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Kernel actor benchmark ({seconds:g}s per row, {settings.KODY_ACTOR_SHARDS} shards over "
        f"{worker_processes()} worker process(es), batch "
        f"{settings.KODY_ACTOR_BATCH_SIZE}, {os.cpu_count()} CPUs, load average {load})\n"
    )

    results: dict[str, dict[str, float]] = {}
    tps_one = pgbench(seconds, clients=1, keys=1)
    tps_many = pgbench(seconds, clients=8, keys=64)
    print(f"{'pgbench single-row upsert, 1 client':46} {tps_one:8.0f} tps")
    print(f"{'pgbench upsert, 8 clients over 64 rows':46} {tps_many:8.0f} tps")

    for label, fn, threads in (
        ("raw SQL from Python, 1 caller", raw_sql(one), 1),
        ("inline actor call (no queue), 1 caller", meter_call([one]), 1),
    ):
        if runs(label):
            results[label] = closed_loop(fn, threads, seconds)
            print(row(label, results[label]))

    settings.KODY_ACTORS_INLINE = False
    celery_rows = [f"one Celery task per call, {threads} caller(s)" for threads in (1, 8)]
    if any(runs(label) for label in celery_rows):
        baseline = celery_worker("bench")
        try:
            celery_task_call()(0)  # warm up and wait for the worker
            for threads, label in zip((1, 8), celery_rows, strict=True):
                if runs(label):
                    results[label] = closed_loop(celery_task_call(), threads, seconds)
                    print(row(label, results[label]))
        finally:
            baseline.terminate()
            baseline.wait(timeout=60)

    one_user = {"1 caller": (1, 1), "8 callers": (1, 8), "32 callers (4 procs)": (4, 8)}
    many_users = {"1 caller": (1, 1), "64 callers (4 procs)": (4, 16)}
    with shard_worker():
        meter_call([one])(0)
        for name, (procs, threads) in one_user.items():
            label = f"queue call(), one user, {name}"
            if not runs(label):
                continue
            results[label] = closed_loop_procs(lambda: meter_call([one]), procs, threads, seconds)
            print(row(label, results[label]))
        for name, (procs, threads) in many_users.items():
            label = f"queue call(), 64 users, {name}"
            if not runs(label):
                continue
            results[label] = closed_loop_procs(lambda: meter_call(many), procs, threads, seconds)
            print(row(label, results[label]))
        label = "mixed meter+RunLog, 64 users, 64 callers"
        if runs(label):
            warm = mixed_call(many)
            for index in range(len(many) * 2):  # each user's RunLog tables, charge then write
                warm(index % len(many))
            results[label] = closed_loop_procs(lambda: mixed_call(many), 4, 16, seconds)
            print(row(label, results[label]))

    if wanted:
        print(f"\n  load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return  # the ratios need every row
    raw = results["raw SQL from Python, 1 caller"]
    sync = results["queue call(), one user, 1 caller"]
    best_one = max(results[f"queue call(), one user, {n}"]["per_s"] for n in one_user)
    best_many = max(results[f"queue call(), 64 users, {n}"]["per_s"] for n in many_users)
    print("\nRatios (same run)")
    print(
        f"  sync call p50 / raw SQL p50          {sync['p50_ms'] / raw['p50_ms']:6.2f}x  "
        f"(call p50 {sync['p50_ms']:.2f} ms; target <= 3 ms)"
    )
    print(f"  one-user calls/s                     {best_one:8.0f}   (target >= 1000)")
    print(f"  one-user calls/s / pgbench 1-client  {best_one / tps_one:6.0%}   (target >= 25%)")
    print(f"  64-user calls/s / pgbench 8-client   {best_many / tps_many:6.0%}")
    mixed = results["mixed meter+RunLog, 64 users, 64 callers"]["per_s"]
    print(f"  mixed calls/s / pgbench 8-client     {mixed / tps_many:6.0%}")
    print(
        f"  inline call p50 / raw SQL p50        "
        f"{results['inline actor call (no queue), 1 caller']['p50_ms'] / raw['p50_ms']:6.2f}x"
    )
    celery_best = max(results[f"one Celery task per call, {t} caller(s)"]["per_s"] for t in (1, 8))
    print(f"  one-user calls/s / best Celery task-per-call {best_one / celery_best:6.2f}x")
    print(f"  load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
