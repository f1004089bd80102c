"""Where the queue's CPU goes: one queue row, CPU time per process kind per call.

    python benchmarks/profile/queue_cpu.py [--users 64] [--procs 4] [--threads 16] [--seconds 5]
        [--py-spy DIR]

Starts the shard workers the way ``actors.py`` does, runs ``UserMeter.consume`` from
``procs`` x ``threads`` callers over ``users`` users for ``seconds``, and reads utime+stime
from ``/proc/PID/stat`` before and after for the shard worker, every Postgres backend and
auxiliary process of the benchmark's server, Redis and the caller processes. Prints calls/s
and CPU milliseconds per call for each kind: on a 2-CPU host shared by all of them, CPU per
call anywhere is throughput lost. With ``--py-spy DIR`` it also records the shard worker and
one caller with py-spy (``--idle``) into flame graphs in DIR.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for its helpers

from _accounts import live_account_ids  # noqa: E402
from _harness import (  # noqa: E402
    children,
    cpu_seconds,
    postgres_pids,
    redis_pid,
    setup_django,
    shard_worker,
)
from actors import DAY, LIMIT, closed_loop_procs, meter_call, mixed_call  # noqa: E402


def postgres_role(pid: int) -> str:
    """What a server process does, from its title: ``backend`` for a client's session, else
    the auxiliary process's name (``walwriter``, ``autovacuum worker``, ...)."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "gone"
    if not title.startswith("postgres: "):
        return "postmaster"
    title = title.removeprefix("postgres: ")
    for role in ("autovacuum worker", "checkpointer", "background writer", "walwriter"):
        if title.startswith(role):
            return role
    return "backend" if " [local]" in title or "(" in title else title


def redis_commands() -> dict[str, int]:
    """Calls per Redis command so far (``INFO commandstats``; a script's own commands count
    under their names as well as under ``evalsha``)."""
    from kody.actors import transport

    stats = transport.client().info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--py-spy", default="")
    options = parser.parse_args()
    setup_django()
    from django.conf import settings

    from apps.entitlements.actor import UserMeter
    from kody.userschema.schemas import ensure_schema

    users = live_account_ids(options.users)
    settings.KODY_ACTORS_INLINE = True
    for user in users:
        ensure_schema(user)
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT)
    settings.KODY_ACTORS_INLINE = False
    factory = (lambda: mixed_call(users)) if options.mixed else (lambda: meter_call(users))
    with shard_worker() as workers:
        warm = factory()
        for index in range(len(users) * 2):
            warm(index % len(users))
        worker_pids = [pid for w in workers for pid in [w.pid, *children(w.pid)]]
        pg = postgres_pids()
        rd = redis_pid()
        me = os.getpid()
        kinds = {"shard worker": worker_pids, "postgres": pg, "redis": [rd] if rd else []}
        before = {kind: sum(map(cpu_seconds, pids)) for kind, pids in kinds.items()}
        pg_before = {pid: cpu_seconds(pid) for pid in pg}
        callers_before = cpu_seconds(me)  # the forked callers are counted from their exit
        spies = []
        if options.py_spy:
            Path(options.py_spy).mkdir(parents=True, exist_ok=True)
            for pid in worker_pids[:1]:
                spies.append(
                    subprocess.Popen(
                        [
                            "py-spy",
                            "record",
                            "--idle",
                            "--nonblocking",
                            "-r",
                            "100",
                            "--threads",
                            "--format",
                            "raw",
                            "-d",
                            str(int(options.seconds)),
                            "-o",
                            f"{options.py_spy}/worker.txt",
                            "-p",
                            str(pid),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        waits: dict[str, int] = {}
        done = threading.Event()
        commands_before = redis_commands()

        def sample() -> None:
            import psycopg
            from django.db import connection

            conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
            while not done.wait(0.005):
                for state, event, query in conn.execute(
                    "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'cpu'),"
                    " left(query, 40) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                    " AND pid <> pg_backend_pid() AND datname = current_database()"
                ).fetchall():
                    key = f"{state:20} {event:28} {query if state == 'active' else ''}"
                    waits[key] = waits.get(key, 0) + 1
            conn.close()

        sampler = threading.Thread(target=sample)
        sampler.start()
        times_before = os.times()
        started = time.perf_counter()
        stats = closed_loop_procs(factory, options.procs, options.threads, options.seconds)
        elapsed = time.perf_counter() - started
        times_after = os.times()
        after = {kind: sum(map(cpu_seconds, pids)) for kind, pids in kinds.items()}
        # By role. A server process started during the run (an autovacuum worker) counts
        # from zero; one that started and ended within it is missed.
        pg_roles: dict[str, float] = {}
        started_since = [pid for pid in postgres_pids() if pid not in pg_before]
        for pid in [*pg, *started_since]:
            role = postgres_role(pid)
            pg_roles[role] = pg_roles.get(role, 0.0) + cpu_seconds(pid) - pg_before.get(pid, 0.0)
        after["postgres"] = before["postgres"] + sum(pg_roles.values())
        done.set()
        sampler.join()
        commands_after = redis_commands()
        for spy in spies:
            spy.wait()
    calls = stats["per_s"] * elapsed
    used = {kind: after[kind] - before[kind] for kind in kinds}
    used["callers"] = (
        times_after.children_user
        + times_after.children_system
        - times_before.children_user
        - times_before.children_system
    )
    del callers_before
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{options.users} users, {options.procs}x{options.threads} callers, "
        f"{'mixed' if options.mixed else 'meter'}: {stats['per_s']:.0f} calls/s, "
        f"p50 {stats['p50_ms']:.2f} ms (load {load})"
    )
    total = sum(used.values())
    spent = {
        name: commands_after[name] - commands_before.get(name, 0)
        for name in commands_after
        if commands_after[name] != commands_before.get(name, 0)
    }
    per_call = sum(spent.values()) / calls
    print(
        f"  redis commands per call: {per_call:.2f} ("
        + ", ".join(f"{n} {c / calls:.2f}" for n, c in sorted(spent.items(), key=lambda i: -i[1]))
        + ")"
    )
    # The answer script deletes the in-flight list once per batch.
    batches = spent.get("del", 0)
    print(f"  batches: {batches}, {calls / max(1, batches):.1f} calls per batch (mean)")
    for kind, seconds in sorted(used.items(), key=lambda item: -item[1]):
        print(
            f"  {kind:14} {seconds:6.2f} s CPU  {seconds / calls * 1000:6.3f} ms/call"
            f"  {seconds / elapsed:5.2f} CPUs"
        )
        if kind == "postgres":
            for role, spent in sorted(pg_roles.items(), key=lambda item: -item[1]):
                if spent > 0:
                    print(f"    {role:20} {spent / calls * 1000:6.3f} ms/call")
    samples = sum(waits.values()) or 1
    for key, count in sorted(waits.items(), key=lambda item: -item[1])[:15]:
        print(f"    {count / samples:6.1%}  {key}")
    print(
        f"  {'total':14} {total:6.2f} s CPU  {total / calls * 1000:6.3f} ms/call"
        f"  {total / elapsed:5.2f} CPUs of {os.cpu_count()}"
    )


if __name__ == "__main__":
    main()
