"""Jobs with real workers through outages: a default-queue worker killed mid-run, a broker
that comes back empty. The run is retried once its lease runs out, never while the first may
still be running, and each occurrence gets exactly one run record.

Real processes: a shard worker (JobManager, RunLog, the meter) and a default-queue worker
(the outbox relay, ``jobs.dispatch_runs``, ``jobs.run_job``) loading ``outage_hooks``. This
process plays beat: it wakes due alarms every few hundred milliseconds. The lease is four
seconds here (``KODY_JOB_LEASE_SECONDS``) so a retry comes quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from apps.jobs import schedules
from apps.jobs.actor import RunLog
from apps.jobs.actor.manager import JobManager
from apps.jobs.models import Job
from apps.jobs.services.runner import wake_due_alarms
from kody import embedded
from kody.fields import new_id
from kody.lanes import run_lane
from kody.outbox.models import OutboxMessage
from tests.accounts.factories import UserFactory
from tests.kernel.conftest import clear_actor_queues, user_schemas_cleanup  # noqa: F401
from tests.kernel.test_actor_crash import _database_url, start_worker

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 4
ENV = {"KODY_JOB_LEASE_SECONDS": str(LEASE_SECONDS)}


def start_default_worker(extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_ACTOR_SHARDS": str(settings.KODY_ACTOR_SHARDS),
        **ENV,
        **(extra_env or {}),
    }
    argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default"]
    argv += ["-P", "solo", "-c", "1", "--include", "tests.jobs.outage_hooks", "-l", "WARNING"]
    argv += ["--without-mingle", "--without-gossip", "--without-heartbeat"]
    return subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL)


def purge_default_queue() -> None:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("default")


@pytest.fixture
def workers(settings, user_schemas_cleanup) -> Iterator[dict[str, subprocess.Popen]]:  # noqa: F811
    settings.KODY_ACTORS_INLINE = False
    clear_actor_queues()
    purge_default_queue()
    running = {"shard": start_worker(ENV), "default": start_default_worker()}
    yield running
    for proc in running.values():
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def schedule_probe(
    owner: Any, log: Path, schedule: dict[str, Any] | None = None, name: str = "outage probe"
) -> str:
    """A probe job written as ``jobSchedule`` writes it (the probe capability exists only in
    the default worker, so this process cannot check it); by default one-off, due a second
    from now."""
    now = timezone.now()
    once = {"type": "once", "runAt": (now + timedelta(seconds=1)).isoformat()}
    stored, first = schedules.normalize(schedule or once, "UTC", now)
    job_id = new_id()
    JobManager.call(
        owner.stable_user_id,
        "create",
        job={
            "id": job_id,
            "name": name,
            "source_id": "",
            "storage_id": f"job:{job_id}",
            "params_json": {"target": {"capability": "testOutageProbe", "args": {"log": str(log)}}},
            "schedule_json": stored,
            "timezone": "UTC",
            "caller_context_json": {
                "userId": owner.stable_user_id,
                # Scheduled without a token (as from a signed-in page): the job's grant is the
                # owner alone, who may act, so every occurrence runs.
                "surface": "ui",
                "scopes": ["*"],
                "principal": f"ui:{owner.stable_user_id}",
            },
            "next_run_at": first.isoformat(),
            "expires_at": None,
            "preserved": False,
        },
    )
    return job_id


def beat_until(done: Any, seconds: float, between: Any = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        wake_due_alarms()
        if between is not None:
            between()
        if done():
            return
        time.sleep(0.3)
    raise AssertionError("timed out waiting")


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def job_runs(owner: Any, job_id: str) -> list[dict[str, Any]]:
    page = RunLog.call(owner.stable_user_id, "list_runs", {"job_id": job_id}, None, 50)
    return [r for r in page["runs"] if r["surface"] == "job"]


def test_a_worker_killed_mid_run_is_retried_after_its_lease_and_never_beside_it(workers, tmp_path):
    owner = UserFactory(plan="max")
    log = tmp_path / "probe.jsonl"
    job_id = schedule_probe(owner, log)
    scheduled_for = Job.objects.get(id=job_id).next_run_at

    def replace_dead_worker() -> None:
        if workers["default"].poll() is not None:
            assert workers["default"].returncode == -9  # it died mid-run, as the probe does
            workers["default"] = start_default_worker()

    finished = Job.objects.filter(id=job_id, last_run_at__isnull=False).exists
    beat_until(finished, 90, between=replace_dead_worker)
    starts = [e for e in events(log) if e["event"] == "start"]
    ends = [e for e in events(log) if e["event"] == "end"]
    assert len(starts) == 2 and len(ends) == 1 and starts[0]["pid"] != starts[1]["pid"]
    assert starts[1]["at"] - starts[0]["at"] >= LEASE_SECONDS - 0.5  # not before the lease ran out
    [run] = job_runs(owner, job_id)
    assert run["status"] == "success"
    assert run["metadata"]["scheduledFor"] == scheduled_for.isoformat()
    job = Job.objects.get(id=job_id)
    assert job.claim_token is None and job.retry_count == 0 and job.last_run_status == "success"


def restart_redis_empty() -> None:
    """The session's Redis goes down and comes back with nothing in it: every queued message
    (the relay's kick included) and every actor-shard key is gone."""
    sock = Path(settings.REDIS_URL.removeprefix("unix://"))
    client = redis.Redis(unix_socket_path=str(sock))
    client.flushall()
    try:
        client.shutdown(nosave=True)
    except redis.ConnectionError:
        pass  # the server closes the connection as it goes
    deadline = time.monotonic() + 10
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    embedded.start_redis(sock.parent)


def test_a_claim_whose_dispatch_was_lost_with_the_broker_runs_once(workers, tmp_path):
    owner = UserFactory(plan="max")
    log = tmp_path / "probe.jsonl"
    log.touch()  # the probe only dies on a first run; this one must not
    job_id = schedule_probe(owner, log)
    workers["default"].terminate()  # nobody consumes the default queue: the kick waits there
    workers["default"].wait(timeout=30)
    claimed = Job.objects.filter(id=job_id, claim_token__isnull=False).exists
    beat_until(claimed, 30)
    assert OutboxMessage.objects.filter(task="jobs.dispatch_runs").count() == 1
    restart_redis_empty()
    workers["default"] = start_default_worker()
    finished = Job.objects.filter(id=job_id, last_run_at__isnull=False).exists
    # The outbox_relay lane's tick finds the dispatch the lost kick never relayed.
    beat_until(finished, 90, between=lambda: run_lane("outbox_relay"))
    assert [e["event"] for e in events(log)] == ["start", "end"]
    [run] = job_runs(owner, job_id)
    assert run["status"] == "success"
    assert not OutboxMessage.objects.exists()
