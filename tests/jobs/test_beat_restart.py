"""A job every minute, on a stepped clock, runs exactly once per minute across a worker kill,
a beat restart and a Redis restart — with every part real: a shard worker (JobManager, RunLog,
the meter), a default-queue worker (the wake, the outbox relay, the runs) and celery beat with
django-celery-beat's scheduler, as ``manage.py up`` starts it. Only beat wakes the scheduler.

The clock: the test and its subprocesses share one ``SteppedClock`` (tests/clock.py); the test
moves it to five seconds past each minute in turn and waits, with generous deadlines, until
that minute's run is recorded. Nothing asserts a wall-clock duration.

Minute 0: the probe kills its own worker mid-run (the worker kill); a new worker is started.
Minute 1: the lease has run out: minute 0 is retried, then minute 1 catches up.
Minute 3: beat is stopped, so nothing wakes the scheduler; minute 4: beat starts again (it reads
its last run from the database) and minutes 3 and 4 run. Before minute 5 Redis restarts empty.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from apps.jobs.models import Job
from tests.accounts.factories import UserFactory
from tests.clock import SteppedClock
from tests.jobs.test_outages import (
    ENV,
    events,
    job_runs,
    purge_default_queue,
    restart_redis_empty,
    schedule_probe,
    start_default_worker,
)
from tests.kernel.conftest import clear_actor_queues, user_schemas_cleanup  # noqa: F401
from tests.kernel.test_actor_crash import _database_url, start_worker

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

MINUTES = 7
WAIT = 120  # seconds for one minute's runs to be recorded on a loaded machine
LEASE = {"KODY_JOB_LEASE_SECONDS": "30"}  # out well before the next minute's step


def start_beat(clock: SteppedClock, pidfile: Path) -> subprocess.Popen:
    import os

    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        **clock.env(),
    }
    argv = [sys.executable, "-m", "celery", "-A", "config", "beat"]
    argv += ["-S", settings.CELERY_BEAT_SCHEDULER, "-l", "WARNING", "--pidfile", str(pidfile)]
    argv += ["--max-interval", "1"]  # a step of the clock is seen within a second
    return subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def clock(tmp_path: Path) -> Iterator[SteppedClock]:
    # Half a minute before a minute mark, a few minutes from now: no literal date.
    start = (timezone.now() + timedelta(minutes=3)).replace(second=30, microsecond=0)
    stepped = SteppedClock(tmp_path / "clock", start)
    yield stepped
    stepped.stop()


@pytest.fixture
def system(
    settings,
    clock: SteppedClock,
    tmp_path: Path,
    user_schemas_cleanup: None,  # noqa: F811
) -> Iterator[dict[str, Any]]:
    from django_celery_beat.models import PeriodicTask

    settings.KODY_ACTORS_INLINE = False
    # Only the wake is under test: the lanes would compete with the runs for the one worker.
    PeriodicTask.objects.exclude(task="jobs.wake_alarms").update(enabled=False)
    PeriodicTask.objects.filter(task="jobs.wake_alarms").update(last_run_at=None, enabled=True)
    clear_actor_queues()
    purge_default_queue()
    env = {**ENV, **LEASE, **clock.env()}
    running: dict[str, Any] = {
        "env": env,
        "pidfile": tmp_path / "beat.pid",
        "shard": start_worker(env),
        "default": start_default_worker(env),
    }
    running["beat"] = start_beat(clock, running["pidfile"])
    yield running
    for name in ("beat", "default", "shard"):
        stop(running[name])


def wait_for(done: Any, what: str, between: Any = None) -> None:
    deadline = time.monotonic() + WAIT
    while not done():
        if between is not None:
            between()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def test_every_minute_runs_once_across_a_worker_kill_a_beat_restart_and_a_redis_restart(
    system: dict[str, Any], clock: SteppedClock, tmp_path: Path
) -> None:
    owner = UserFactory(plan="max")
    log = tmp_path / "probe.jsonl"  # missing: the first run kills its worker
    job_id = schedule_probe(owner, log, {"type": "cron", "expression": "* * * * *"}, "every minute")
    first: datetime = Job.objects.get(id=job_id).next_run_at
    minute = [first + timedelta(minutes=n) for n in range(MINUTES)]

    def ran(*minutes: int) -> Any:
        wanted = {minute[n].isoformat() for n in minutes}

        def check() -> bool:
            done = {r["metadata"].get("scheduledFor") for r in job_runs(owner, job_id)}
            return wanted <= done

        return check

    # Minute 0: the run kills its worker mid-run; nothing reports.
    clock.at(minute[0] + timedelta(seconds=5))
    wait_for(lambda: system["default"].poll() is not None, "the probe to kill its worker")
    assert system["default"].returncode == -9
    system["default"] = start_default_worker(system["env"])
    # Minute 1: minute 0's lease is over: it is retried, and minute 1 catches up behind it.
    clock.at(minute[1] + timedelta(seconds=5))
    wait_for(ran(0, 1), "minutes 0 and 1")
    clock.at(minute[2] + timedelta(seconds=5))
    wait_for(ran(2), "minute 2")
    # Minute 3: beat is down; nothing wakes the scheduler.
    stop(system["beat"])
    clock.at(minute[3] + timedelta(seconds=5))
    # Minute 4: beat is back; it fires from its last run in the database.
    clock.at(minute[4] + timedelta(seconds=5))
    system["beat"] = start_beat(clock, system["pidfile"])
    wait_for(ran(3, 4), "minutes 3 and 4 after beat restarted")
    # Redis restarts empty; the workers and beat reconnect on their own.
    clock.at(minute[4] + timedelta(seconds=30))
    restart_redis_empty()
    for n in (5, 6):
        clock.at(minute[n] + timedelta(seconds=5))
        wait_for(ran(n), f"minute {n} after Redis restarted")

    runs = job_runs(owner, job_id)
    scheduled = [r["metadata"]["scheduledFor"] for r in runs]
    assert sorted(scheduled) == [m.isoformat() for m in minute]  # each minute exactly once
    assert all(r["status"] == "success" for r in runs)
    # The probe's own log: the killed start, then one start-end pair per minute, never two
    # runs at once (each start is followed by its own end before the next start).
    seen = [(e["event"], e["pid"]) for e in events(log)]
    assert seen[0][0] == "start" and len(seen) == 1 + 2 * MINUTES
    pairs = seen[1:]
    for start, end in zip(pairs[::2], pairs[1::2], strict=True):
        assert start[0] == "start" and end == ("end", start[1])
