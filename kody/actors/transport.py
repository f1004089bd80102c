"""The shard queues on the broker's Redis.

Each shard queue ``actors.shard-N`` is a Redis list of JSON calls; callers push on the left,
the shard's worker takes from the right, so each user's calls come out in the order they went
in. A caller waiting for an answer blocks on ``actors.reply.<call id>``; pushing the call and
starting the wait go out in one round trip. See ``kody.actors.worker`` for the consumer side
and ADR 0006 for why this is not one Celery task per call.
"""

from __future__ import annotations

import functools
import hashlib

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

QUEUE_PREFIX = "actors.shard-"
REPLY_PREFIX = "actors.reply."
REPLY_TTL_SECONDS = 300


def queue_name(shard: int) -> str:
    return f"{QUEUE_PREFIX}{shard}"


def all_queue_names() -> list[str]:
    return [queue_name(shard) for shard in range(settings.KODY_ACTOR_SHARDS)]


def inflight_key(queue: str) -> str:
    """Calls a shard worker has taken and not yet answered (replayed after a crash)."""
    return f"{queue}.inflight"


def lease_key(queue: str) -> str:
    """Held by the one worker consuming ``queue``."""
    return f"{queue}.lease"


def shard_of_queue(name: str) -> int | None:
    if not name.startswith(QUEUE_PREFIX):
        return None
    suffix = name.removeprefix(QUEUE_PREFIX)
    return int(suffix) if suffix.isdigit() else None


def shard_for(user_id: str) -> int:
    # Stable across processes and restarts (unlike hash()); changing KODY_ACTOR_SHARDS moves
    # users between queues, so drain the queues first (see the kernel runbook).
    digest = hashlib.blake2b(user_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % settings.KODY_ACTOR_SHARDS


def reply_key(call_id: str) -> str:
    return REPLY_PREFIX + call_id


def redis_url() -> str:
    broker = settings.CELERY_BROKER_URL
    if broker.startswith("redis+socket://"):
        return "unix://" + broker.removeprefix("redis+socket://")
    if broker.startswith(("redis://", "rediss://", "unix://")):
        return broker
    raise ImproperlyConfigured("actor shard queues need a Redis broker (CELERY_BROKER_URL)")


@functools.cache
def _client(url: str) -> redis.Redis:
    # redis-py's pool notices a fork and reconnects, so one client per process is safe. Its
    # default 5 s socket timeout would cut a longer BLPOP short: the wait is bounded by the
    # command's own timeout instead.
    return redis.Redis.from_url(url, socket_timeout=None, socket_connect_timeout=5)


def client() -> redis.Redis:
    return _client(redis_url())


def push(queue: str, message: str) -> None:
    client().lpush(queue, message)


def push_and_wait(queue: str, message: str, call_id: str, timeout: float) -> bytes | None:
    pipe = client().pipeline(transaction=False)
    pipe.lpush(queue, message)
    pipe.blpop([reply_key(call_id)], timeout=timeout)
    _, reply = pipe.execute()
    return None if reply is None else reply[1]
