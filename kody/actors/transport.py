"""The shard queues on the broker's Redis.

Each shard queue is a Redis list of JSON calls; callers push on the left, the shard's worker
takes from the right, so each user's calls come out in the order they went in. A caller
waiting for an answer blocks on its reply key; pushing the call and starting the wait go out
in one round trip. See ``kody.actors.worker`` for the consumer side and docs/architecture/kernel.md
for why this is not one Celery task per call.

The hot path (a call's push-and-wait, a cast's push, the consumer's scripts) goes over a
``Line``: one plain RESP connection per thread, written once and read once per round trip.
redis-py's pooled client spends ~120 us of CPU and six system calls on one command here (a
pool health check of three calls, a socket timeout switch), a ``Line`` ~15 us and two; on a
host whose CPUs Postgres, the workers and the callers share, that is throughput.
Everything else (cluster, TLS, admin, tests) keeps redis-py.

Every key of shard N carries the Redis Cluster hash tag ``{actors.shard-N}``, so all of a
shard's keys live in one hash slot: the consumer's Lua scripts and the caller's push-and-wait
run unchanged on a single Redis or on Redis Cluster / Valkey. The Celery queue name a worker
is started with (``-Q actors.shard-N``) stays untagged; it names the shard, not a key.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import threading
from collections.abc import Sequence
from typing import cast

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis._parsers.base import BaseParser
from redis.connection import parse_url

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


Arg = str | bytes | int | float


def _pack(args: Sequence[Arg]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, bytes):
            data = arg
        else:
            data = repr(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


class Line:
    """One connection to a plain Redis (unix socket or TCP, no TLS), used by one thread.

    ``send`` writes any number of commands in one ``sendall`` and reads their replies
    (RESP2) in order: a pipeline without a pool, a health check or a socket timeout. A
    blocking command's wait is bounded by its own timeout. An error reply is raised, typed as
    redis-py types it (``LOADING`` is a ``BusyLoadingError``, a connection error), after the
    other replies were read (the line stays usable); any
    socket or protocol failure closes the line and raises ``redis.ConnectionError``, which
    callers treat as an outage. A line that fails on its first write after sitting idle
    (the server restarted, an idle timeout) reconnects once and resends: a call pushed twice
    is answered from its record, like redis-py's own retry."""

    def __init__(self, url: str) -> None:
        self.params = parse_url(url)
        self.sock: socket.socket | None = None
        self.buf = b""
        self.pos = 0
        self.skips = False  # the server takes CLIENT REPLY SKIP (asked on connecting)

    def _connect(self) -> socket.socket:
        params = self.params
        self.close()
        try:
            if "path" in params:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(5)
                    sock.connect(params["path"])
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection(
                    (params.get("host", "localhost"), params.get("port", 6379)), timeout=5
                )
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(None)
        except OSError as exc:
            raise redis.ConnectionError(f"actor broker: {exc}") from exc
        self.sock, self.buf, self.pos = sock, b"", 0
        hello: list[list[Arg]] = []
        if params.get("password"):
            auth: list[Arg] = ["AUTH"]
            if params.get("username"):
                auth.append(params["username"])
            hello.append([*auth, params["password"]])
        if params.get("db"):
            hello.append(["SELECT", params["db"]])
        if hello:
            self._exchange(b"".join(_pack(command) for command in hello), len(hello))
        # Can this connection have a reply skipped (``CLIENT REPLY SKIP``; refused by an ACL
        # without ``client``, a proxy, a server that renamed the command)? Asked once per
        # connection, so a call never sends a SKIP the server would answer with an error.
        try:
            self._exchange(_pack(["CLIENT", "REPLY", "ON"]), 1)
        except redis.ResponseError:
            self.skips = False
        else:
            self.skips = True
        return sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def send(self, *commands: Sequence[Arg]) -> list[object]:
        return self.send_packed(b"".join(_pack(command) for command in commands), len(commands))

    def connected(self) -> Line:
        """This line, connected (``skips`` is known)."""
        if self.sock is None:
            try:
                self._connect()
            except _Dropped:
                raise redis.ConnectionError("the actor broker closed the connection") from None
        return self

    def send_packed(self, payload: bytes, count: int, *, skipping: bool = False) -> list[object]:
        """``send`` for commands already packed (RESP) with ``count`` replies to read;
        ``skipping``: the payload skips a reply, so only a line that ``skips`` may send it."""
        fresh = self.sock is None
        try:
            if fresh:
                self._connect()
            if skipping and not self.skips:
                raise redis.ConnectionError("the actor broker refuses CLIENT REPLY SKIP")
            return self._exchange(payload, count)
        except _Dropped:
            if fresh:
                raise redis.ConnectionError("the actor broker closed the connection") from None
        # A reused line that died before answering anything: once more on a new one.
        self._connect()
        if skipping and not self.skips:
            raise redis.ConnectionError("the actor broker refuses CLIENT REPLY SKIP")
        try:
            return self._exchange(payload, count)
        except _Dropped:
            raise redis.ConnectionError("the actor broker closed the connection") from None

    def _exchange(self, payload: bytes, count: int) -> list[object]:
        sock = self.sock
        assert sock is not None
        replies: list[object] = []
        try:
            sock.sendall(payload)
            for _ in range(count):
                replies.append(self._reply())
        except _Dropped:
            partial = bool(replies) or len(self.buf) > self.pos
            self.close()
            if partial:
                # Part of an answer came: what the server did is unknown, never resend.
                raise redis.ConnectionError("the actor broker closed the connection") from None
            raise
        except OSError as exc:
            self.close()
            if isinstance(exc, (BrokenPipeError, ConnectionResetError)) and not replies:
                raise _Dropped from exc
            raise redis.ConnectionError(f"actor broker: {exc}") from exc
        except BaseException:
            # Interrupted mid-reply (a signal, a timeout exception): the stream is unusable.
            self.close()
            raise
        failed = [reply for reply in replies if isinstance(reply, redis.RedisError)]
        if failed:
            raise failed[0]
        return replies

    def _fill(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise _Dropped
        self.buf = self.buf[self.pos :] + chunk if self.pos < len(self.buf) else chunk
        self.pos = 0

    def _reply(self) -> object:
        # Parsed from what has arrived; a reply cut short is parsed again from its start
        # once more has come (replies here are small, and a read takes up to 64 KiB).
        while True:
            try:
                value, self.pos = _parse(self.buf, self.pos)
                return value
            except _Incomplete:
                self._fill()
            except _Unexpected as exc:
                self.close()
                raise redis.ConnectionError(f"actor broker: unexpected reply {exc}") from None


class _Incomplete(Exception):
    """More of the reply is still to come."""


class _Unexpected(Exception):
    """Not RESP2."""


def _parse(buf: bytes, pos: int) -> tuple[object, int]:
    """One RESP2 reply from ``buf`` at ``pos``, and where the next starts; ``_Incomplete`` if
    it has not all arrived. One function on ``bytes`` (no per-line method call or copy into
    a ``bytearray``): a call's reply is parsed in a few microseconds."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind = buf[pos] if pos < end else 0
    if kind == 36:  # $ bulk string
        size = int(buf[pos + 1 : end])
        if size < 0:
            return None, end + 2
        start = end + 2
        stop = start + size
        if len(buf) < stop + 2:
            raise _Incomplete
        return buf[start:stop], stop + 2
    if kind == 42:  # * array
        size = int(buf[pos + 1 : end])
        pos = end + 2
        if size < 0:
            return None, pos
        items = []
        for _ in range(size):
            item, pos = _parse(buf, pos)
            items.append(item)
        return items, pos
    if kind == 58:  # : integer
        return int(buf[pos + 1 : end]), end + 2
    if kind == 43:  # + simple string
        return buf[pos + 1 : end], end + 2
    if kind == 45:  # - error: typed as redis-py types them (LOADING is a BusyLoadingError, ...)
        return BaseParser.parse_error(buf[pos + 1 : end].decode(errors="replace")), end + 2
    raise _Unexpected(repr(buf[pos : min(end, pos + 40)]))


class _Dropped(Exception):
    """The server closed the line before a whole reply came back."""


_lines = threading.local()


def line() -> Line | None:
    """This thread's ``Line`` to the shard Redis, or None where redis-py must do the work (a
    cluster, TLS). Rebuilt after a fork and when the URL changes."""
    url = redis_url()
    key = (url, os.getpid())
    found = getattr(_lines, "line", None)
    if found is not None and _lines.key == key:
        return found
    if found is not None:
        found.close()
    made = None if is_cluster_url(url) or url.startswith("rediss://") else Line(url)
    _lines.line, _lines.key = made, key
    return made


def push(shard: int, message: str) -> None:
    redis_line = line()
    if redis_line is None:
        client().lpush(queue_key(shard), message)
    else:
        queue, data = queue_key(shard).encode(), message.encode()
        redis_line.send_packed(_LPUSH % (len(queue), queue, len(data), data), 1)


# A call's commands packed by one format each (``_pack`` spends ~10 us on them).
_LPUSH = b"*3\r\n$5\r\nLPUSH\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
_LPUSH_BLPOP = _LPUSH + b"*3\r\n$5\r\nBLPOP\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
_SKIP = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nSKIP\r\n"


def push_and_wait(shard: int, message: str, call_id: str, timeout: float) -> bytes | None:
    """Push a call and wait for its reply: one write, one read (two on a cluster).

    Where the server allows it the push's own reply is skipped (``CLIENT REPLY SKIP``): the
    caller reads once and is woken once, for the answer, instead of twice. The
    cost: a push Redis refuses (out of memory under ``noeviction``) is not seen, and the
    caller waits out its timeout (``ActorCallTimeout``, naming the key to retry with)."""
    redis_line = line()
    if redis_line is not None:
        queue, data = queue_key(shard).encode(), message.encode()
        key, wait = reply_key(shard, call_id).encode(), repr(timeout).encode()
        packed = _LPUSH_BLPOP % (len(queue), queue, len(data), data, len(key), key, len(wait), wait)
        if not redis_line.connected().skips:
            _, reply = redis_line.send_packed(packed, 2)
            return None if reply is None else reply[1]  # type: ignore[index]
        try:
            (reply,) = redis_line.send_packed(_SKIP + packed, 1, skipping=True)
        except redis.ResponseError as exc:
            # The wait refused (READONLY after a failover, MISCONF), or the SKIP itself (an
            # ACL changed since the line connected: then the push's and the wait's replies
            # are still to come, and the push may have gone in). Either way the broker cannot
            # take calls as it should: an outage (retry with the key), on a fresh line.
            redis_line.close()
            raise redis.ConnectionError(f"actor broker: {exc}") from exc
        return None if reply is None else reply[1]  # type: ignore[index]
    redis_client = client()
    if isinstance(redis_client, redis.RedisCluster):
        # Both keys share the shard's hash slot, but a cluster pipeline cannot carry a
        # blocking command: two round trips to the same node instead of one.
        redis_client.lpush(queue_key(shard), message)
        reply = redis_client.blpop([reply_key(shard, call_id)], timeout=timeout)
        return None if reply is None else cast(bytes, reply[1])
    pipe = redis_client.pipeline(transaction=False)
    pipe.lpush(queue_key(shard), message)
    pipe.blpop([reply_key(shard, call_id)], timeout=timeout)
    _, reply = pipe.execute()
    return None if reply is None else reply[1]
