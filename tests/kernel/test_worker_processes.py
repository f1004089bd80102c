"""Shard workers spread over several processes, as ``manage.py up`` starts them by default
(one per CPU, ADR 0029): every user's calls still apply exactly once and in each caller's
order, whichever process drains the user's shard."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kody.actors import transport
from kody.actors.topology import worker_commands, worker_processes
from tests.kernel.conftest import clear_actor_queues, new_user_id
from tests.kernel.test_actor_crash import _database_url
from tests.kernel.test_actor_queue import assert_exact, hammer

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]


def test_calls_stay_exact_and_ordered_per_user_across_two_worker_processes(
    settings, user_schemas_cleanup, monkeypatch
):
    settings.KODY_ACTOR_SHARDS = 4
    settings.KODY_ACTOR_WORKER_PROCESSES = 0  # the default: one per CPU
    settings.KODY_ACTORS_INLINE = False
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert worker_processes() == 2
    # Users on shards of both processes (0 and 2 go to one, 1 and 3 to the other).
    users: list[str] = []
    while {transport.shard_for(user) % 2 for user in users} != {0, 1} or len(users) < 4:
        users.append(new_user_id())
    clear_actor_queues()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_ACTOR_SHARDS": "4",
        "KODY_ACTOR_LEASE_SECONDS": "2",
    }
    shard_workers = [
        argv
        for argv in worker_commands(sys.executable)
        if "-Q" in argv and argv[argv.index("-Q") + 1].startswith("actors.shard-")
    ]
    assert len(shard_workers) == 2
    procs = [
        subprocess.Popen(
            [*argv[:-2], "-l", "WARNING", "--include", "tests.kernel.sample_actors"],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for argv in shard_workers
    ]
    try:
        client = transport.client()
        deadline = time.monotonic() + 60
        while not all(client.exists(transport.lease_key(shard)) for shard in range(4)):
            assert time.monotonic() < deadline, "the shard workers did not start"
            assert all(proc.poll() is None for proc in procs)
            time.sleep(0.05)
        holders = {client.get(transport.lease_key(shard)).split(b":")[1] for shard in range(4)}
        assert len(holders) == 2  # two processes hold the four shards
        seen = hammer(users, threads=8, calls=60)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    for user in users:
        assert_exact(seen[user], sum(len(revisions) for revisions in seen[user]))
