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
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from _harness import ROOT, database_url, pct, setup_django, shard_worker

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


def drain(people: list[Any], deadline: float) -> tuple[float, int, float | None]:
    """Wake like beat until every job reported; (seconds, jobs done, seconds until the first
    claim was seen — the alarm's part of the first run's lag)."""
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
            wake_due_alarms()
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--jobs-per-user", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300, help="hard cap, seconds")
    parser.add_argument("--target", choices=sorted(TARGETS), default="accountUsage")
    parser.add_argument(
        "--shard-processes",
        type=int,
        default=None,
        help="shard-worker processes (default KODY_ACTOR_WORKER_PROCESSES)",
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
        with shard_worker(processes=args.shard_processes):
            purge_default_queue()
            people = seed(users, per_user)
            time.sleep(1.5)  # the last user's jobs are due too
            print(f"seeded {users * per_user} due jobs")
            base = baseline(people[: max(1, len(people) // 10)], per_user)
            base_total = sum(base) * len(people) / max(1, len(people) // 10)
            with default_worker(args.concurrency):
                start = timezone.now()
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
    print(
        f"baseline direct calls: p50 {pct(base, 0.5) * 1000:.1f} ms,"
        f" {jobs} calls serially ~{base_total:.1f} s;"
        f" drain / serial baseline = {seconds / base_total:.2f}x"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
