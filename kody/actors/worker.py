"""The shard consumer: a Celery worker bootstep that drains actor shard queues in batches.

Design note. Start a worker with ``-Q actors.shard-0,actors.shard-1`` and this step takes
those queues away from Celery's own consumer and drains each with one thread (so each shard
has exactly one writer, concurrency 1). A thread:

1. takes the shard's lease (``{actors.shard-N}.lease``, its token) and with it a new epoch,
   higher than any before (``kody.actors.fence``), which it writes into the database before
   touching the shard. A second worker started for the same shard waits as a hot standby;
2. keeps the lease with a heartbeat thread that renews it every third of the lease,
   whatever the batch is doing, and stops renewing once the epoch is no longer its own;
3. moves up to ``KODY_ACTOR_BATCH_SIZE`` calls at once from the queue to its in-flight list,
   fewer when the last batch's calls were slow (``BatchSizer``): a batch is meant to last
   about ``KODY_ACTOR_BATCH_SECONDS``, since nothing of it is visible (committed) or answered
   before all of it is — 125 alarm fires, each claiming jobs, were one 5-30 s transaction.
   When the queue is empty it waits with ``BLMOVE queue queue RIGHT RIGHT`` (a rotation of
   the list onto itself that moves nothing) and then takes — the wait and the take go out
   in one write, so a lone call is woken for and taken in one round trip — so batches form
   only under load and a lone caller never waits for one to fill. A take or answer that
   found the queue empty goes straight to that wait (no second look);
4. runs them through ``kody.actors.runtime.execute`` (one transaction for the whole batch,
   a savepoint per user when something fails; the fence is checked before COMMIT), then, after
   the COMMIT, pushes every reply, deletes the in-flight list and takes the next batch in one
   script (one round trip between batches under load).

Every Redis step that touches the shard (take, replay, answer-and-delete, renew, release) is
a Lua script that first checks the lease still holds this thread's token and the epoch key
its epoch: a consumer that lost its shard (paused past the lease) can neither take, answer,
nor delete a successor's calls, and its transaction cannot commit.

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

import redis
from celery import bootsteps

log = logging.getLogger("kody.actors.worker")

BLOCK_SECONDS = 0.5

# KEYS: lease, epoch. ARGV: token, lease ms, floor (the database's epoch).
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local epoch = redis.call('INCR', KEYS[2])
if epoch <= tonumber(ARGV[3]) then
  epoch = tonumber(ARGV[3]) + 1
  redis.call('SET', KEYS[2], epoch)
end
return epoch
"""

# Every fenced script starts with this: KEYS[1] lease, KEYS[2] epoch; ARGV[1] token, ARGV[2]
# epoch. A consumer whose lease expired or whose epoch was superseded gets false back.
_FENCED = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return false
end
"""

# ARGV[3]: lease ms.
_RENEW = _FENCED + "return redis.call('PEXPIRE', KEYS[1], ARGV[3])"


def _take(queue: str, in_flight: str, most: str) -> str:
    """Lua: move up to ``most`` calls, oldest first, from ``queue`` to ``in_flight``; return
    them."""
    return f"""
local taken = {{}}
for i = 1, tonumber({most}) do
  local item = redis.call('LMOVE', {queue}, {in_flight}, 'RIGHT', 'LEFT')
  if not item then break end
  taken[#taken + 1] = item
end
return taken
"""


# KEYS[3] queue, KEYS[4] in-flight; ARGV[3] most to take.
_TAKE = _FENCED + _take("KEYS[3]", "KEYS[4]", "ARGV[3]")

# KEYS[3] in-flight, oldest last.
_REPLAY = _FENCED + "return redis.call('LRANGE', KEYS[3], 0, -1)"

# Answer a batch and take the next in one round trip. KEYS[3] in-flight, KEYS[4] queue,
# KEYS[5..] reply keys; ARGV[3] reply ttl, ARGV[4] most to take next, ARGV[5..] reply texts.
_ANSWER = (
    _FENCED
    + """
for i = 5, #KEYS do
  redis.call('RPUSH', KEYS[i], ARGV[i])
  redis.call('EXPIRE', KEYS[i], ARGV[3])
end
redis.call('DEL', KEYS[3])
"""
    + _take("KEYS[4]", "KEYS[3]", "ARGV[4]")
)

_RELEASE = _FENCED + "return redis.call('DEL', KEYS[1])"


class BatchSizer:
    """How many calls the next take may move: ``most`` (``KODY_ACTOR_BATCH_SIZE``), or fewer
    so that a batch of calls as slow as the last batch's lasts about ``seconds``
    (``KODY_ACTOR_BATCH_SECONDS``; 0 turns sizing off). Group commit pays for itself on cheap
    calls (a few ms each: the cap decides); a batch of heavy ones (an alarm fire claiming a
    user's due jobs, tens of ms) is cut to a few, so its effects commit, and its casts'
    follow-ups (outbox relays) start, within about ``seconds`` instead of after all of it.
    Only the last batch counts: a burst of slow calls shrinks the next take at once, and a
    return to cheap ones grows it back at once. At least one call is always taken."""

    def __init__(self, most: int, seconds: float) -> None:
        self.most = max(1, most)
        self.seconds = seconds
        self.per_call = 0.0  # seconds per call in the last batch (0: none seen yet)

    def observe(self, calls: int, elapsed: float) -> None:
        if calls > 0:
            self.per_call = max(0.0, elapsed) / calls

    def next(self) -> int:
        if self.seconds <= 0 or self.per_call <= 0:
            return self.most
        return max(1, min(self.most, int(self.seconds / self.per_call)))


class ShardConsumer(threading.Thread):
    def __init__(self, shard: int, stopping: threading.Event) -> None:
        from django.conf import settings

        from kody.actors import transport
        from kody.actors.recycle import Recycler

        super().__init__(name=f"actors.shard-{shard}", daemon=True)
        self.shard = shard
        self.stopping = stopping
        self.queue = transport.queue_key(shard)
        self.inflight = transport.inflight_key(shard)
        self.lease = transport.lease_key(shard)
        self.epoch_key = transport.epoch_key(shard)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.batch_size = settings.KODY_ACTOR_BATCH_SIZE
        self.sizer = BatchSizer(self.batch_size, settings.KODY_ACTOR_BATCH_SECONDS)
        self.lease_ms = max(1, int(settings.KODY_ACTOR_LEASE_SECONDS * 1000))
        self.redis = transport.client()
        self.scripts = {
            name: self.redis.register_script(source)
            for name, source in (
                ("acquire", _ACQUIRE),
                ("renew", _RENEW),
                ("take", _TAKE),
                ("replay", _REPLAY),
                ("answer", _ANSWER),
                ("release", _RELEASE),
            )
        }
        self.epoch: int | None = None  # set while this thread owns the shard
        self.lost = threading.Event()
        self._session: Any = None  # the psycopg connection the epoch row names
        self._db: Any = None  # this thread's Django connection (the heartbeat cancels on it)
        self._busy = False  # inside a batch's database work
        self.recycler = Recycler()  # bounded backend memory (kody.actors.recycle)

    # --- fenced Redis operations ----------------------------------------------------------

    def _fenced(
        self,
        name: str,
        keys: list[str],
        args: list[Any],
        epoch: int,
        *,
        after: list[Any] | None = None,
    ) -> Any:
        """Run a fenced script. ``after``: a command sent first in the same write (the idle
        wait); Redis runs a connection's commands in order, so the script runs once it
        returns, with no round trip between them."""
        keys = [self.lease, self.epoch_key, *keys]
        args = [self.token, epoch, *args]
        line = self._line()
        if line is None:
            if after is not None:
                self.redis.execute_command(*after)
            return self.scripts[name](keys=keys, args=args)
        script = self.scripts[name]
        first = [after] if after is not None else []
        try:
            *_, result = line.send(*first, ["EVALSHA", script.sha, len(keys), *keys, *args])
        except redis.exceptions.NoScriptError:
            # Not loaded (a restarted Redis): the wait, if any, has been served already.
            (result,) = line.send(["EVAL", script.script, len(keys), *keys, *args])
        return result

    def _line(self) -> Any:
        """The calling thread's own connection (``transport.Line``) for the hot scripts, or
        None on a cluster; the heartbeat thread gets its own."""
        from kody.actors import transport

        return transport.line()

    def _acquire(self) -> int | None:
        from django.db import DEFAULT_DB_ALIAS, connection, connections

        from kody.actors import fence

        holder = self.redis.get(self.lease)
        if holder is not None and holder != self.token.encode():
            return None  # another consumer's: stand by without asking the database
        floor = fence.floor(self.shard)
        epoch = self.scripts["acquire"](
            keys=[self.lease, self.epoch_key], args=[self.token, self.lease_ms, floor]
        )
        if epoch is None:
            return None
        epoch = int(epoch)
        self.epoch = epoch
        self.lost.clear()
        # Before anything else: a batch of the previous owner that passed its check commits
        # first (the row lock), one that did not will fail it.
        connection.ensure_connection()
        self._db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself, not the thread proxy
        self._session = connection.connection
        self._busy = True  # a claim stuck behind a newer owner is cancelled too
        try:
            claimed = fence.claim(self.shard, epoch)
        finally:
            self._busy = False
        if not claimed:
            log.warning("shard %s: epoch %s is already superseded", self.shard, epoch)
            self.epoch = None
            return None
        return epoch

    def heartbeat(self) -> None:
        """Renews the lease every third of it while this thread owns the shard; its own
        thread, so a long batch (a slow method, a lock wait, a database blip) keeps it."""
        interval = self.lease_ms / 3000
        while not self.stopping.wait(interval):
            epoch = self.epoch
            if epoch is None:
                continue
            try:
                if self.lost.is_set() or not self._fenced("renew", [], [self.lease_ms], epoch):
                    if self.epoch == epoch:
                        self._lose(epoch)
            except Exception:
                log.warning("shard %s: lease renewal failed", self.shard, exc_info=True)

    def _lose(self, epoch: int) -> None:
        if not self.lost.is_set():
            log.warning("shard %s: lease lost at epoch %s", self.shard, epoch)
            self.lost.set()
        raw = self._db.connection if self._db is not None else None
        if self._busy and raw is not None:
            # The batch may be waiting on row locks held by the new owner (or a paused owner
            # after it): cancel its query, it cannot commit anyway. The runtime may have
            # reconnected mid-batch, so this is whatever connection the thread has now.
            try:
                raw.cancel()
            except Exception:
                log.debug("shard %s: cancel failed", self.shard, exc_info=True)

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        from django.db import connections

        from kody.dbpool import without_pool

        without_pool()  # this thread's one long-lived connection closes for real
        beat = threading.Thread(target=self.heartbeat, name=f"{self.name}.heartbeat", daemon=True)
        beat.start()
        try:
            while not self.stopping.is_set():
                try:
                    self._serve()
                except Exception:
                    log.exception("shard %s consumer failed; restarting in 1s", self.shard)
                    connections.close_all()
                    self.stopping.wait(1.0)
        finally:
            beat.join(timeout=5)
            connections.close_all()

    def _serve(self) -> None:
        from django.db import connections

        from kody.actors.fence import Fence, FenceLost, holding

        epoch = self._acquire()
        if epoch is None:
            self.stopping.wait(min(1.0, self.lease_ms / 3000))
            return
        log.info("shard %s: consuming at epoch %s", self.shard, epoch)
        why = "lease lost"
        try:
            with holding(Fence(self.shard, epoch)):
                self._consume(epoch)
        except FenceLost as exc:
            why = f"fenced: {exc}"
        finally:
            self.epoch = None
        if self.stopping.is_set():
            self._fenced("release", [], [], epoch)
        else:
            log.warning("shard %s: gave up epoch %s (%s); standing by", self.shard, epoch, why)
            # A successor may have ended this session already; a standby needs none.
            connections.close_all()

    def _consume(self, epoch: int) -> None:
        """Replay what is in flight, then take and run batches until the shard is lost."""
        pending = self._fenced("replay", [self.inflight], [], epoch)
        if pending is None:
            return
        pending = [bytes(item) for item in reversed(pending)]
        if pending:
            log.info("shard %s: resuming %d in-flight call(s)", self.shard, len(pending))
        # A batch already taken is finished even when stopping (its answer takes no more).
        empty = False  # the last look found the queue empty
        while not self.lost.is_set() and (pending or not self.stopping.is_set()):
            if not pending:
                taken = self._take(epoch, wait=empty)
                if taken is None:
                    return
                pending = taken
                empty = not taken
            if pending:
                pending = self._process(pending, epoch)
                empty = not pending  # answer-and-take looked at the queue just now

    def _take(self, epoch: int, *, wait: bool = False) -> list[bytes] | None:
        """Take the next batch; ``wait``: when the queue was just found empty, wait for a
        call first — in the same write as the take (``_fenced``'s ``after``), so a lone call
        wakes the consumer and is taken in one round trip.

        The wait takes nothing: ``BLMOVE queue queue`` rotates the list onto itself, moving
        nothing, and returns once a call is there (or after ``BLOCK_SECONDS``; the take
        then finds nothing). Only the fenced take moves calls, so a paused consumer's wait
        can never carry a call off."""
        wake = ["BLMOVE", self.queue, self.queue, "RIGHT", "RIGHT", BLOCK_SECONDS] if wait else None
        taken = self._fenced(
            "take", [self.queue, self.inflight], [self.sizer.next()], epoch, after=wake
        )
        return None if taken is None else list(taken)

    def _process(self, raw: list[bytes], epoch: int) -> list[bytes]:
        """Run a batch, then answer it and take the next one (returned) in one script."""
        from kody.actors.fence import FenceLost
        from kody.actors.runtime import execute
        from kody.actors.transport import REPLY_TTL_SECONDS, reply_key
        from kody.actors.wire import Call

        calls = []
        for item in raw:
            try:
                calls.append(Call.decode(item))
            except (ValueError, KeyError, TypeError):
                log.error("shard %s: dropping malformed message %r", self.shard, item[:200])
        started = time.monotonic()
        outcomes = self._execute_until_done(execute, calls)
        self.sizer.observe(len(calls), time.monotonic() - started)
        keys, texts = [], []
        for call, outcome in zip(calls, outcomes, strict=True):
            if call.reply:
                keys.append(reply_key(self.shard, call.id))
                texts.append(outcome.text)
        most = 0 if self.stopping.is_set() else self.sizer.next()
        taken = self._fenced(
            "answer", [self.inflight, self.queue, *keys], [REPLY_TTL_SECONDS, most, *texts], epoch
        )
        if taken is None:
            raise FenceLost(f"shard {self.shard}: epoch {epoch} lost before answering")
        self.recycler.after_batch(call.user_id for call in calls)
        return list(taken)

    def _execute_until_done(self, execute: Any, calls: list[Any]) -> list[Any]:
        from django.db import DatabaseError, connections

        delay = 0.1
        while True:
            try:
                self._track_session(self.epoch_or_lost())
                self._busy = True
                try:
                    return execute(calls)
                finally:
                    self._busy = False
            except DatabaseError:
                # The database is unreachable: keep the batch in flight and retry it.
                log.exception("shard %s: database unavailable; retrying batch", self.shard)
                connections.close_all()
                if self.stopping.wait(delay):
                    raise
                delay = min(delay * 2, 5.0)

    def epoch_or_lost(self) -> int:
        from kody.actors.fence import FenceLost

        epoch = self.epoch
        if epoch is None or self.lost.is_set():
            raise FenceLost(f"shard {self.shard}: lease lost during the batch")
        return epoch

    def _track_session(self, epoch: int) -> None:
        """Keep the shard's epoch row naming this thread's database session (a successor
        ends it on takeover), and remember it so the heartbeat can cancel its query."""
        from django.db import connection

        from kody.actors import fence

        connection.ensure_connection()
        if self._session is not connection.connection:
            if self._session is not None:
                fence.register_session(self.shard, epoch)
            self._session = connection.connection


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
        _warn_stranded()

    def stop(self, worker: Any) -> None:
        self.stopping.set()
        deadline = time.monotonic() + 30
        for thread in self.threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))

    terminate = stop


def _warn_stranded() -> None:
    """Say so, loudly, when calls sit on shards beyond the count (left there when the count
    was lowered): no worker drains them until an operator moves them."""
    from django.db import connection

    from kody.actors import reshard

    try:
        found = reshard.stranded()
    except Exception:
        log.warning("could not look for stranded shard queues", exc_info=True)
        return
    finally:
        connection.close()  # the worker's main thread needs no database session of its own
    for each in found:
        log.error(
            "%s is beyond KODY_ACTOR_SHARDS and holds %d queued and %d in-flight call(s) no"
            " worker drains: run manage.py move_stranded_shards",
            each.queue,
            each.depth,
            each.inflight,
        )
