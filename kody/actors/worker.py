"""The shard consumer: a Celery worker bootstep that drains actor shard queues in batches.

Design note. Start a worker with ``-Q actors.shard-0,actors.shard-1`` and this step takes
those queues away from Celery's own consumer and drains each with one thread (so each shard
has exactly one writer, concurrency 1). A thread:

1. holds a lease key (``actors.shard-N.lease``) so a second worker started for the same shard
   waits instead of competing; the lease expires if the worker dies;
2. moves up to ``KODY_ACTOR_BATCH_SIZE`` calls at once from the queue to its in-flight list
   (a Lua script, atomic with the lease check); when the queue is empty it blocks for one
   call and runs it alone, so batches form only under load and cost idle callers nothing;
3. runs them through ``kody.actors.runtime.execute`` (one transaction for the whole batch,
   a savepoint per user when something fails), then, after its COMMIT, pushes every reply
   and deletes the in-flight list in one pipeline.

A worker killed at any point leaves its calls in the in-flight list; whoever takes the lease
next runs them first. Calls that had committed find their records and answer from them, so a
redelivery re-applies nothing (at-least-once delivery, exactly-once effects).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from celery import bootsteps

log = logging.getLogger("kody.actors.worker")

BLOCK_SECONDS = 0.5

_DRAIN = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return false end
redis.call('PEXPIRE', KEYS[3], ARGV[3])
local taken = {}
for i = 1, tonumber(ARGV[2]) do
  local item = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not item then break end
  taken[#taken + 1] = item
end
return taken
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class ShardConsumer(threading.Thread):
    def __init__(self, shard: int, stopping: threading.Event) -> None:
        from django.conf import settings

        from kody.actors import transport

        super().__init__(name=f"actors.shard-{shard}", daemon=True)
        self.shard = shard
        self.stopping = stopping
        self.queue = transport.queue_name(shard)
        self.inflight = transport.inflight_key(self.queue)
        self.lease = transport.lease_key(self.queue)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.batch_size = settings.KODY_ACTOR_BATCH_SIZE
        self.lease_ms = int(settings.KODY_ACTOR_LEASE_SECONDS * 1000)
        self.redis = transport.client()
        self.drain = self.redis.register_script(_DRAIN)
        self.release = self.redis.register_script(_RELEASE)

    def run(self) -> None:
        from django.db import connections

        try:
            while not self.stopping.is_set():
                try:
                    self._serve()
                except Exception:
                    log.exception("shard %s consumer failed; restarting in 1s", self.shard)
                    connections.close_all()
                    self.stopping.wait(1.0)
        finally:
            self.release(keys=[self.lease], args=[self.token])
            connections.close_all()

    def _serve(self) -> None:
        if not self.redis.set(self.lease, self.token, nx=True, px=self.lease_ms):
            if self.redis.get(self.lease) != self.token.encode():
                self.stopping.wait(min(1.0, self.lease_ms / 3000))
                return
        pending = [bytes(item) for item in reversed(self.redis.lrange(self.inflight, 0, -1))]
        if pending:
            log.info("shard %s: resuming %d in-flight call(s)", self.shard, len(pending))
        while not self.stopping.is_set():
            if not pending:
                taken = self._take()
                if taken is None:
                    log.warning("shard %s: lease lost; re-acquiring", self.shard)
                    return
                pending = taken
            if pending:
                self._process(pending)
                pending = []

    def _take(self) -> list[bytes] | None:
        taken = self.drain(
            keys=[self.queue, self.inflight, self.lease],
            args=[self.token, self.batch_size, self.lease_ms],
        )
        if taken is None:
            return None
        if taken:
            return list(taken)
        # Idle: block for one call and run it at once. Whatever arrives meanwhile is drained
        # as a batch on the next turn, so a lone caller never waits for a batch to fill.
        first = self.redis.blmove(self.queue, self.inflight, BLOCK_SECONDS, "RIGHT", "LEFT")
        return [] if first is None else [first]

    def _process(self, raw: list[bytes]) -> None:
        from kody.actors.runtime import execute
        from kody.actors.transport import REPLY_TTL_SECONDS, reply_key
        from kody.actors.wire import Call

        calls = []
        for item in raw:
            try:
                calls.append(Call.decode(item))
            except (ValueError, KeyError, TypeError):
                log.error("shard %s: dropping malformed message %r", self.shard, item[:200])
        outcomes = self._execute_until_done(execute, calls)
        pipe = self.redis.pipeline(transaction=False)
        for call, outcome in zip(calls, outcomes, strict=True):
            if call.reply:
                pipe.rpush(reply_key(call.id), outcome.text)
                pipe.expire(reply_key(call.id), REPLY_TTL_SECONDS)
        pipe.delete(self.inflight)
        pipe.execute()

    def _execute_until_done(self, execute: Any, calls: list[Any]) -> list[Any]:
        from django.db import DatabaseError, connections

        delay = 0.1
        while True:
            try:
                return execute(calls)
            except DatabaseError:
                # The database is unreachable: keep the batch in flight and retry it.
                log.exception("shard %s: database unavailable; retrying batch", self.shard)
                connections.close_all()
                if self.stopping.wait(delay):
                    raise
                delay = min(delay * 2, 5.0)


class ShardDrain(bootsteps.StartStopStep):
    """Registered on the Celery app in ``config/celery.py``."""

    label = "actor shards"

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        from kody.actors.transport import shard_of_queue

        queues = worker.app.amqp.queues
        shards = {name: shard_of_queue(name) for name in list(queues.consume_from)}
        mine = {name: shard for name, shard in shards.items() if shard is not None}
        if mine:
            queues.deselect(list(mine))
        self.shards = sorted(mine.values())
        self.stopping = threading.Event()
        self.threads: list[ShardConsumer] = []

    def include_if(self, worker: Any) -> bool:
        return bool(self.shards)

    def start(self, worker: Any) -> None:
        self.stopping.clear()
        self.threads = [ShardConsumer(shard, self.stopping) for shard in self.shards]
        for thread in self.threads:
            thread.start()
        log.info("draining actor shards %s", self.shards)

    def stop(self, worker: Any) -> None:
        self.stopping.set()
        deadline = time.monotonic() + 30
        for thread in self.threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))

    terminate = stop
