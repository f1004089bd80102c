"""A shard worker killed (SIGKILL) mid-call: nothing committed is lost, nothing applied twice."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import transport
from tests.kernel.conftest import clear_actor_queues
from tests.kernel.sample_actors import Probe

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]


def _database_url() -> str:
    db = settings.DATABASES["default"]
    host = quote(str(db["HOST"]), safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    name = connection.settings_dict["NAME"]
    return f"postgres://{db['USER']}:{quote(db['PASSWORD'] or '')}@{host}{port}/{name}"


def start_worker(extra_env: dict[str, str] | None = None, stderr: Any = None) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_ACTOR_LEASE_SECONDS": "1",
        "KODY_ACTOR_SHARDS": str(settings.KODY_ACTOR_SHARDS),
        **(extra_env or {}),
    }
    queues = ",".join(transport.all_queue_names())
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "-Q",
        queues,
        "-P",
        "solo",
        "-c",
        "1",
        "--include",
        "tests.kernel.sample_actors",
        "-l",
        "WARNING",
        "--without-mingle",
        "--without-gossip",
        "--without-heartbeat",
    ]
    return subprocess.Popen(
        argv, cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=stderr
    )


def call_in_background(user: str, method: str, marker: Path) -> dict:
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = Probe.call(user, method, str(marker), timeout=60)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    box["thread"] = thread
    return box


def job_runs(user: str) -> int:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    return UserMeter.call(user, "read", resource="job_runs_per_day", day=day)["count"]


def test_killed_worker_loses_nothing_and_applies_nothing_twice(owner_id, tmp_path, settings):
    settings.KODY_ACTORS_INLINE = True
    for _ in range(3):  # committed before any crash
        Probe.call(owner_id, "bump")
    settings.KODY_ACTORS_INLINE = False
    clear_actor_queues()
    workers = [start_worker()]
    try:
        for method, expected in (("die_before_commit", 1), ("die_after_commit", 2)):
            pending = call_in_background(owner_id, method, tmp_path / method)
            assert workers[-1].wait(timeout=60) == -9  # the worker killed itself mid-call
            workers.append(start_worker())  # takes over the lease, replays its in-flight list
            pending["thread"].join(timeout=90)
            assert "error" not in pending, repr(pending.get("error"))
            assert pending["value"] == expected
        settings.KODY_ACTORS_INLINE = True
        assert job_runs(owner_id) == 2
        assert Probe.call(owner_id, "bump") == 4  # the three bumps from before survived
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(timeout=30)
