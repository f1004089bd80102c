"""Closed-loop load for the actor benchmark (``benchmarks/actors.py``): callers as threads or
forked processes calling back to back for a fixed time, two kinds of call interleaved on one
caller, and pgbench's single-row upsert as the baseline every ratio is taken against.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from _harness import pg_binary, psql_args, summary


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


def interleaved(
    first: Callable[[int], object], second: Callable[[int], object], seconds: float
) -> tuple[dict[str, float], dict[str, float]]:
    """One caller alternating ``first`` and ``second`` for ``seconds``: each one's latency,
    measured over the same stretch of time (calls/s counts each one's share of it)."""
    samples: tuple[list[float], list[float]] = ([], [])
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    turn = 0
    while time.perf_counter() < deadline:
        fn = (first, second)[turn % 2]
        start = time.perf_counter()
        fn(0)
        samples[turn % 2].append(time.perf_counter() - start)
        turn += 1
    elapsed = time.perf_counter() - started
    return summary(samples[0], elapsed), summary(samples[1], elapsed)


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
