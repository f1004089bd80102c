"""Jobs all due at once: how long until every one has a run record, and the scheduling lag.

    REDIS_URL=redis://127.0.0.1:6379/3 python benchmarks/jobs.py [--scale 0.05] [--timeout 300]

Seeds ``--users`` users (500 at scale 1) with ``--jobs-per-user`` one-off jobs each (20: 10,000
at scale 1; fewer than ``KODY_MAX_DUE_JOBS_PER_ALARM``, so one alarm per user claims them all),
every job's target the ``accountUsage`` capability, every job due before the clock starts.
Then, with a real shard worker and a real default-queue worker (prefork, ``--concurrency``),
it does what beat does — ``jobs.wake_alarms`` at once and then every 60 s — and waits until
every job has reported (``finish`` writes the run record and ``last_run_at`` in one
transaction). Prints the drain time, the lag from the start to each run's ``startedAt`` (p50,
p99; target p99 < 60 s), and the baseline: the same capability calls made directly, one after
another, from this process through the same shard worker.

Nothing here can hang: every wait has a deadline and the whole run is cut off by ``--timeout``
(SIGALRM), after which the workers are stopped and what was measured so far is printed.
Runs on the benchmark database (``test_kody_bench``) with fresh users each time.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from _harness import (
    ROOT,
    children,
    cpu_seconds,
    database_url,
    pct,
    postgres_pids,
    redis_pid,
    setup_django,
    shard_worker,
)

# --target: accountUsage is the row (two meter-actor round trips and a dozen queries a
# call); whoami does no I/O, so its row is the scheduling pipeline alone.
TARGETS = {
    "accountUsage": {"capability": "accountUsage", "args": {}},
    "whoami": {"capability": "whoami", "args": {}},
}
TARGET = TARGETS["accountUsage"]
BEAT_SECONDS = 60


class OutOfTime(Exception):
    pass


def _out_of_time(signum: int, frame: Any) -> None:
    raise OutOfTime


@contextmanager
def default_worker(concurrency: int) -> Any:
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL}
    name = f"bench-default-{os.getpid()}@%h"
    argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default"]
    argv += ["-n", name, "-P", "prefork", "-c", str(concurrency), "-l", "WARNING"]
    argv += ["--without-mingle", "--without-gossip", "--without-heartbeat"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        _wait_ready(proc, name.replace("%h", socket.gethostname()))
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_ready(proc: subprocess.Popen, name: str) -> None:
    """Until this worker answers a ping: the clock starts with the system up, so a worker's
    boot (Django and Celery imports, several seconds here) is not counted as scheduling lag.
    Pinged by name: the shard worker is a Celery worker too and answers a broadcast ping at
    once, which until session 5 started the clock 2-5 s before this worker consumed (the
    "~3 s before the first run" of the earlier rows). A worker answers a ping from the same
    event loop that takes its tasks, so once it answers, it consumes."""
    from config.celery import app

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if app.control.ping(destination=[name], timeout=0.5):
            return
    raise RuntimeError("the default worker did not start")


def purge_default_queue() -> None:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("default")


def seed(users: int, per_user: int) -> list[Any]:
    from django.forms.models import model_to_dict
    from django.utils import timezone

    from apps.accounts.models import User
    from apps.jobs import services
    from apps.jobs.actor.manager import JobManager
    from apps.jobs.models import Job
    from kody.capabilities import Context

    people = []
    tag = secrets.token_hex(4)
    for n in range(users):
        person = User.objects.create_user(
            username=f"bench-jobs-{tag}-{n}",
            email=f"bench-jobs-{tag}-{n}@example.test",
            password=None,
            plan="max",
        )
        template = services.schedule_job(
            Context(user=person),
            name="bench",
            target=TARGET,
            # Due a second from now: long before seeding ends, so all are due at the start.
            schedule={"type": "once", "runAt": (timezone.now() + timedelta(seconds=1)).isoformat()},
        )
        row = model_to_dict(Job.objects.get(id=template["id"]))
        Job.objects.bulk_create(
            Job(**{**row, "id": f"{template['id']}-{k}", "storage_id": f"job:bench-{k}"})
            for k in range(per_user - 1)
        )
        JobManager.call(person.stable_user_id, "sync")
        people.append(person)
    return people


def baseline(people: list[Any], per_user: int) -> list[float]:
    """The same capability calls, made directly and one at a time."""
    from kody.capabilities import Context, invoke

    samples = []
    for person in people:
        for _ in range(per_user):
            started = time.perf_counter()
            invoke(TARGET["capability"], Context(user=person), TARGET["args"])
            samples.append(time.perf_counter() - started)
    return samples


WOKEN: list[tuple[int, float]] = []  # per wake: alarms cast, seconds the casting took


def drain(people: list[Any], deadline: float) -> tuple[float, int, float | None]:
    """Wake like beat until every job reported; (seconds, jobs done, seconds until the first
    claim was seen — the alarm's part of the first run's lag). Every due alarm in the
    database is cast, other users' too (an earlier run's users may have some due)."""
    from django.db.models import Q

    from apps.jobs.models import Job
    from apps.jobs.services.runner import wake_due_alarms

    mine = Job.objects.filter(user_id__in=[p.stable_user_id for p in people])
    total = mine.count()
    started = time.monotonic()
    next_beat = started
    done, first_claim = 0, None
    while time.monotonic() < deadline:
        if time.monotonic() >= next_beat:
            cast_at = time.monotonic()
            WOKEN.append((wake_due_alarms(), time.monotonic() - cast_at))
            next_beat += BEAT_SECONDS
        if (
            first_claim is None
            and mine.filter(Q(claim_token__isnull=False) | Q(last_run_at__isnull=False)).exists()
        ):
            first_claim = time.monotonic() - started
        done = mine.filter(last_run_at__isnull=False).count()
        if done == total:
            break
        time.sleep(0.05 if first_claim is None else 0.2)
    return time.monotonic() - started, done, first_claim


def lags(people: list[Any], start: datetime) -> list[float]:
    from apps.jobs.actor import RunLog

    found = []
    for person in people:
        page = RunLog.call(person.stable_user_id, "list_runs", {"surface": "job"}, None, 500)
        found += [
            (datetime.fromisoformat(r["startedAt"]) - start).total_seconds() for r in page["runs"]
        ]
    return found


def _shape(query: str) -> str:
    """A statement's start with schemas, literals and numbers made alike."""
    import re

    query = re.sub(r"\s+", " ", query)
    query = re.sub(r"u_[0-9a-f]{8,}", "u_*", query)
    query = re.sub(r"'[^']*'", "?", query)
    return re.sub(r"\b\d+\b", "N", query)[:90]


class Watch:
    """During the drain: CPU seconds per process kind from ``/proc`` (sampled every 0.5 s, so a
    Postgres backend that comes and goes is counted), what Postgres backends are doing
    (``pg_stat_activity`` every 20 ms: state, wait event, the statement's start) and, with
    ``--py-spy DIR``, py-spy flame data (raw) of each shard worker and the default worker."""

    def __init__(self, shards: list[subprocess.Popen], default: subprocess.Popen, spy: str):
        self.kinds = {"shard": [p.pid for p in shards], "default": [default.pid]}
        self.default_pid = default.pid
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.activity: dict[str, int] = {}
        self.done = threading.Event()
        self.spy_dir = spy
        self.spies: list[subprocess.Popen] = []

    def _pids(self) -> dict[int, str]:
        found = {pid: kind for kind, pids in self.kinds.items() for pid in pids}
        found.update({pid: "default" for pid in children(self.default_pid)})
        found.update({pid: "pg" for pid in postgres_pids()})
        rd = redis_pid()
        if rd:
            found[rd] = "redis"
        found[os.getpid()] = "driver"
        return found

    def _cpu_loop(self) -> None:
        while True:
            for pid, kind in self._pids().items():
                used = cpu_seconds(pid)
                self.first.setdefault(pid, 0.0 if self.started_once else used)
                if used:
                    self.last[pid] = (kind, used)
            self.started_once = True
            if self.done.wait(0.5):
                break

    def _pg_loop(self) -> None:
        import psycopg
        from django.db import connection

        conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
        while not self.done.wait(0.02):
            for state, event, query in conn.execute(
                "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'cpu'),"
                " left(query, 200) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                " AND datname = current_database() AND state <> 'idle'"
            ).fetchall():
                query = _shape(query) if state == "active" else ""
                key = f"{state[:12]:12} {event[:24]:24} {query}"
                self.activity[key] = self.activity.get(key, 0) + 1
        conn.close()

    def __enter__(self) -> Watch:
        self.started_once = False
        self.started = time.monotonic()
        self.threads = [
            threading.Thread(target=self._cpu_loop),
            threading.Thread(target=self._pg_loop),
        ]
        for t in self.threads:
            t.start()
        if self.spy_dir:
            os.makedirs(self.spy_dir, exist_ok=True)
            spy = [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "-r", "50"]
            spy += ["--nonblocking", "--format", "raw"]
            for kind, pids in self.kinds.items():
                for pid in pids:
                    out = os.path.join(self.spy_dir, f"{kind}-{pid}.txt")
                    extra = ["--subprocesses"] if kind == "default" else []
                    self.spies.append(
                        subprocess.Popen(
                            [*spy, *extra, "-o", out, "-p", str(pid)],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.started
        self.done.set()
        for t in self.threads:
            t.join()
        for spy in self.spies:
            spy.send_signal(signal.SIGINT)
        for spy in self.spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()

    def report(self, jobs: int) -> None:
        used: dict[str, float] = {}
        for pid, (kind, last) in self.last.items():
            used[kind] = used.get(kind, 0.0) + last - self.first.get(pid, 0.0)
        total = sum(used.values())
        print(
            "CPU s "
            + " / ".join(f"{k} {v:.1f}" for k, v in sorted(used.items()))
            + f"; total {total:.1f} s over {self.seconds:.1f} s"
            + f" ({total / max(self.seconds, 1e-9):.2f} CPUs);"
            + f" {total / max(jobs, 1) * 1000:.1f} ms/job"
        )
        samples = sum(self.activity.values())
        if samples:
            print(f"pg_stat_activity, {samples} non-idle backend samples:")
            for key, n in sorted(self.activity.items(), key=lambda item: -item[1])[:25]:
                print(f"  {n / samples:6.1%}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--jobs-per-user", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300, help="hard cap, seconds")
    parser.add_argument("--target", choices=sorted(TARGETS), default="accountUsage")
    parser.add_argument("--watch", action="store_true", help="CPU per process, pg_stat_activity")
    parser.add_argument("--py-spy", default="", help="record the workers into DIR (raw)")
    parser.add_argument(
        "--shard-processes",
        type=int,
        default=None,
        help="shard-worker processes (default topology.worker_processes())",
    )
    args = parser.parse_args()
    global TARGET
    TARGET = TARGETS[args.target]
    users = max(1, round(args.users * args.scale))
    per_user = args.jobs_per_user
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.alarm(args.timeout)
    deadline = time.monotonic() + args.timeout - 15  # leave time to stop the workers

    setup_django()
    from django.utils import timezone

    print(
        f"load average {os.getloadavg()[0]:.1f}; {users} users x {per_user} jobs;"
        f" target {TARGET['capability']}; default worker concurrency {args.concurrency};"
        f" shard-worker processes {args.shard_processes or 'default'}"
    )
    try:
        with shard_worker(processes=args.shard_processes) as shards:
            purge_default_queue()
            people = seed(users, per_user)
            time.sleep(1.5)  # the last user's jobs are due too
            print(f"seeded {users * per_user} due jobs")
            base = baseline(people[: max(1, len(people) // 10)], per_user)
            base_total = sum(base) * len(people) / max(1, len(people) // 10)
            watch = None
            with default_worker(args.concurrency) as worker:
                start = timezone.now()
                if args.watch or args.py_spy:
                    with Watch(shards, worker, args.py_spy) as watch:
                        seconds, done, first_claim = drain(people, deadline)
                else:
                    seconds, done, first_claim = drain(people, deadline)
            found = lags(people, start)
    except OutOfTime:
        print(f"cut off by --timeout {args.timeout}s")
        return
    finally:
        signal.alarm(0)
    jobs = users * per_user
    print(f"every job reported: {done == jobs} ({done}/{jobs}) in {seconds:.1f} s")
    print(f"jobs/s {done / seconds:.1f}")
    if found:
        print(f"lag to startedAt: p50 {pct(found, 0.5):.1f} s  p99 {pct(found, 0.99):.1f} s")
        claimed = "never seen" if first_claim is None else f"{first_claim:.2f} s"
        print(f"first claim seen {claimed}; first run started {min(found):.2f} s")
    if WOKEN:
        print(
            "wakes: "
            + ", ".join(f"{n} alarms cast in {took:.2f} s" for n, took in WOKEN)
            + f" ({users} of the first wake's are this run's users)"
        )
    print(
        f"baseline direct calls: p50 {pct(base, 0.5) * 1000:.1f} ms,"
        f" {jobs} calls serially ~{base_total:.1f} s;"
        f" drain / serial baseline = {seconds / base_total:.2f}x"
    )
    if watch is not None:
        watch.report(done)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
