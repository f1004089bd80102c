"""The shard queues on the broker's Redis.

Each shard queue is a Redis list of JSON calls; callers push on the left, the shard's worker
takes from the right, so each user's calls come out in the order they went in. A caller
waiting for an answer blocks on its reply key; pushing the call and starting the wait go out
in one round trip. See ``kody.actors.worker`` for the consumer side and ADR 0006 for why this
is not one Celery task per call.

Every key of shard N carries the Redis Cluster hash tag ``{actors.shard-N}``, so all of a
shard's keys live in one hash slot: the consumer's Lua scripts and the caller's push-and-wait
run unchanged on a single Redis or on Redis Cluster / Valkey. The Celery queue name a worker
is started with (``-Q actors.shard-N``) stays untagged; it names the shard, not a key.
"""

from __future__ import annotations

import functools
import hashlib

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

QUEUE_PREFIX = "actors.shard-"
REPLY_TTL_SECONDS = 300
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def queue_name(shard: int) -> str:
    """The Celery queue name a worker is started with for this shard."""
    return f"{QUEUE_PREFIX}{shard}"


def all_queue_names() -> list[str]:
    return [queue_name(shard) for shard in range(settings.KODY_ACTOR_SHARDS)]


def hash_tag(shard: int) -> str:
    return "{" + queue_name(shard) + "}"


def queue_key(shard: int) -> str:
    """The list callers push calls onto."""
    return hash_tag(shard)


def inflight_key(shard: int) -> str:
    """Calls a shard worker has taken and not yet answered (replayed after a crash)."""
    return f"{hash_tag(shard)}.inflight"


def lease_key(shard: int) -> str:
    """Held by the one worker consuming the shard (its token)."""
    return f"{hash_tag(shard)}.lease"


def epoch_key(shard: int) -> str:
    """The shard's fencing token: grows by one each time a consumer takes the lease."""
    return f"{hash_tag(shard)}.epoch"


def reply_key(shard: int, call_id: str) -> str:
    return f"{hash_tag(shard)}.reply.{call_id}"


def shard_keys_pattern() -> str:
    """A SCAN pattern matching every shard key (tests and benchmarks clear them)."""
    return "{" + QUEUE_PREFIX + "*"


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


def redis_url() -> str:
    """``KODY_ACTOR_REDIS_URL`` if set (``redis+cluster://host:port`` selects Redis Cluster),
    else the Celery broker's Redis."""
    explicit = getattr(settings, "KODY_ACTOR_REDIS_URL", "")
    if explicit:
        return explicit
    broker = settings.CELERY_BROKER_URL
    if broker.startswith("redis+socket://"):
        return "unix://" + broker.removeprefix("redis+socket://")
    if broker.startswith(("redis://", "rediss://", "unix://")):
        return broker
    raise ImproperlyConfigured("actor shard queues need a Redis broker (CELERY_BROKER_URL)")


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0] in CLUSTER_SCHEMES


def connect(url: str, **options: object) -> redis.Redis | redis.RedisCluster:
    """A client for ``url``: a cluster client for ``redis+cluster://``, else a plain one."""
    scheme, rest = url.split("://", 1)
    if scheme in CLUSTER_SCHEMES:
        return redis.RedisCluster.from_url(f"{CLUSTER_SCHEMES[scheme]}://{rest}", **options)
    return redis.Redis.from_url(url, **options)


@functools.cache
def _client(url: str) -> redis.Redis | redis.RedisCluster:
    # redis-py's pool notices a fork and reconnects, so one client per process is safe. Its
    # default 5 s socket timeout would cut a longer BLPOP short: the wait is bounded by the
    # command's own timeout instead.
    return connect(url, socket_timeout=None, socket_connect_timeout=5)


def client() -> redis.Redis | redis.RedisCluster:
    return _client(redis_url())


def push(shard: int, message: str) -> None:
    client().lpush(queue_key(shard), message)


def push_and_wait(shard: int, message: str, call_id: str, timeout: float) -> bytes | None:
    redis_client = client()
    if isinstance(redis_client, redis.RedisCluster):
        # Both keys share the shard's hash slot, but a cluster pipeline cannot carry a
        # blocking command: two round trips to the same node instead of one.
        redis_client.lpush(queue_key(shard), message)
        reply = redis_client.blpop([reply_key(shard, call_id)], timeout=timeout)
        return None if reply is None else reply[1]
    pipe = redis_client.pipeline(transaction=False)
    pipe.lpush(queue_key(shard), message)
    pipe.blpop([reply_key(shard, call_id)], timeout=timeout)
    _, reply = pipe.execute()
    return None if reply is None else reply[1]
