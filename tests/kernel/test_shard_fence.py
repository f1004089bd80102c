"""Chaos: a shard consumer paused mid-batch past its lease, a standby taking over, the first
resumed — many rounds, several users — and still every call applied exactly once, in order.

Two real worker processes serve one shard. Each round the test waits until the lease holder
has calls in flight, SIGSTOPs it (so its heartbeat stops too), waits for the standby to take
the shard, and SIGCONTs it. The resumed consumer has lost its epoch: its transaction must not
commit, its scripts must not take, answer or delete anything.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from kody.actors import ActorCallTimeout, fence, transport
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.actors.worker import ShardConsumer
from kody.userschema.naming import schema_name_for
from tests.kernel.conftest import clear_actor_queues, new_user_id
from tests.kernel.sample_actors import Probe
from tests.kernel.test_actor_crash import start_worker

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

ROUNDS = 20  # the twenty takeovers
USERS = 4
STEP_PAUSE = 0.01  # each call takes a little while, so batches are in flight when paused
WORKER_ENV = {
    "KODY_ACTOR_SHARDS": "1",
    "KODY_ACTOR_LEASE_SECONDS": "0.6",
    "KODY_ACTOR_BATCH_SIZE": "8",
}


SPARE_SHARD = 7  # keys and epoch row of a shard no worker in this module serves


def _bump(user: str, key: str) -> Call:
    return Call(id=key, user_id=user, schema=schema_name_for(user), actor=Probe.name, method="bump")


def _bumps(settings, user: str) -> int:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    return Probe.call(user, "bump") - 1  # counts this read too


def test_a_batch_under_a_superseded_epoch_cannot_commit(settings, owner_id, outsider_id):
    fence.claim(SPARE_SHARD, 1)
    with fence.holding(fence.Fence(SPARE_SHARD, 1)):
        assert [o.ok for o in execute([_bump(owner_id, "a1"), _bump(outsider_id, "b1")])] == [
            True,
            True,
        ]
    assert fence.claim(SPARE_SHARD, 2)  # a successor took the shard
    assert not fence.claim(SPARE_SHARD, 2)  # and nobody can claim that epoch again
    with fence.holding(fence.Fence(SPARE_SHARD, 1)):
        with pytest.raises(fence.FenceLost):  # one user: one transaction
            execute([_bump(owner_id, "a2")])
        with pytest.raises(fence.FenceLost):  # two users: the group commit
            execute([_bump(owner_id, "a3"), _bump(outsider_id, "b3")])
    with fence.holding(fence.Fence(SPARE_SHARD, 2)):
        assert execute([_bump(owner_id, "a4")])[0].ok
    assert _bumps(settings, owner_id) == 2  # a1 and a4; nothing the old epoch ran after
    assert _bumps(settings, outsider_id) == 1


def test_a_consumer_that_lost_its_lease_cannot_take_answer_or_delete(settings, owner_id):
    client = transport.client()
    keys = [
        transport.queue_key(SPARE_SHARD),
        transport.inflight_key(SPARE_SHARD),
        transport.lease_key(SPARE_SHARD),
        transport.epoch_key(SPARE_SHARD),
    ]
    client.delete(*keys)
    queue, inflight, lease = keys[:3]
    old = ShardConsumer(SPARE_SHARD, threading.Event())
    new = ShardConsumer(SPARE_SHARD, threading.Event())
    try:
        old_epoch = old._acquire()
        assert old_epoch is not None
        assert new._acquire() is None  # a standby waits while the lease is held
        client.lpush(queue, b"first", b"second")
        assert old._take(old_epoch) == [b"first", b"second"]  # oldest first
        client.delete(lease)  # the old consumer paused past its lease
        new_epoch = new._acquire()
        assert new_epoch == old_epoch + 1
        client.lpush(queue, b"third")
        reply = transport.reply_key(SPARE_SHARD, "c1")
        assert old._take(old_epoch) is None
        assert old._fenced("replay", [inflight], [], old_epoch) is None
        assert old._fenced("answer", [inflight, queue, reply], [60, 5, "{}"], old_epoch) is None
        assert old._fenced("renew", [], [1000], old_epoch) is None
        assert client.exists(reply) == 0
        assert client.lrange(queue, 0, -1) == [b"third"]
        assert client.lrange(inflight, 0, -1) == [b"second", b"first"]  # the successor's now
        assert new._fenced("replay", [inflight], [], new_epoch) == [b"second", b"first"]
        # The idle wait rotates the queue onto itself: it never carries a call off.
        client.lpush(queue, b"fourth")
        client.blmove(queue, queue, 0.1, "RIGHT", "RIGHT")
        assert client.lrange(queue, 0, -1) == [b"fourth", b"third"]
    finally:
        client.delete(*keys)
        fence.ShardEpoch.objects.filter(shard=SPARE_SHARD).delete()


def _holder_pid(client) -> int | None:  # type: ignore[no-untyped-def]
    token = client.get(transport.lease_key(0))
    return None if token is None else int(token.split(b":")[1])


def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class Caller(threading.Thread):
    """One user's sequence: two casts, then a call (retried with its key on a timeout)."""

    def __init__(self, user: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.user, self.stop = user, stop
        self.last = 0
        self.answered = 0
        self.retries = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop.is_set() or n % 3:  # finish on a call: the last step answers
                n += 1
                key = f"chaos:{self.user[:12]}:{n}"
                if n % 3:
                    Probe.cast(self.user, "step", n, STEP_PAUSE, idempotency_key=key)
                    continue
                while True:
                    try:
                        result = Probe.call(
                            self.user, "step", n, STEP_PAUSE, timeout=8, idempotency_key=key
                        )
                        break
                    except ActorCallTimeout:
                        self.retries += 1  # told to retry: same key
                assert result == n
                self.answered += 1
            self.last = n
        except BaseException as exc:
            self.error = exc


def test_a_paused_consumer_cannot_commit_take_or_delete_after_a_takeover(
    settings, user_schemas_cleanup, tmp_path: Path
):
    settings.KODY_ACTOR_SHARDS = 1
    settings.KODY_ACTORS_INLINE = False
    clear_actor_queues()
    client = transport.client()
    log_path = tmp_path / "workers.log"
    users = [new_user_id() for _ in range(USERS)]
    with open(log_path, "wb") as log_file:
        workers = [start_worker(WORKER_ENV, log_file) for _ in range(2)]
        stop = threading.Event()
        callers = [Caller(user, stop) for user in users]
        try:
            _wait(lambda: _holder_pid(client) is not None, 60, "a consumer")
            first_epoch = int(client.get(transport.epoch_key(0)))
            for caller in callers:
                caller.start()
            paused = 0
            while paused < ROUNDS:
                _wait(lambda: client.llen(transport.inflight_key(0)) > 0, 30, "a batch")
                pid = _holder_pid(client)
                assert pid in {worker.pid for worker in workers}
                os.kill(pid, signal.SIGSTOP)
                try:
                    # Only a pause with calls in flight counts as a round.
                    mid_batch = client.llen(transport.inflight_key(0)) > 0
                    _wait(
                        lambda pid=pid: _holder_pid(client) not in (None, pid),
                        30,
                        "the standby to take over",
                    )
                    time.sleep(random.uniform(0.0, 0.3))
                finally:
                    os.kill(pid, signal.SIGCONT)
                paused += mid_batch
            stop.set()
            for caller in callers:
                caller.join(timeout=120)
                assert not caller.is_alive()
                assert caller.error is None, repr(caller.error)
            _wait(lambda: client.llen(transport.inflight_key(0)) == 0, 30, "an idle shard")
            last_epoch = int(client.get(transport.epoch_key(0)))
        finally:
            stop.set()
            for worker in workers:
                if worker.poll() is None:
                    worker.terminate()
                    worker.wait(timeout=30)

    assert last_epoch - first_epoch >= ROUNDS  # every round was a real takeover
    log_text = log_path.read_text(errors="replace")
    assert re.search(r"shard 0: gave up epoch \d+ \(fenced", log_text), log_text[-3000:]
    assert client.llen(transport.queue_key(0)) == 0

    settings.KODY_ACTORS_INLINE = True
    for caller in callers:
        assert caller.answered == caller.last // 3
        assert Probe.call(caller.user, "chaos_state") == {
            "last": caller.last,  # the last step ran ...
            "applied": caller.last,  # ... every step ran exactly once ...
            "out_of_order": 0,  # ... each right after the one before it
        }
