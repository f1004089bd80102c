"""The shard consumer's round trips: a lone caller is answered in three (wait, take,
answer-and-take), a busy shard in one per batch, and a batch of slow calls makes the consumer
take fewer next time. Each test runs on a Redis of its own (``private_redis``), so ``INFO
commandstats`` counts only what the test did.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from kody.actors import transport
from kody.actors.worker import BatchSizer, ShardConsumer
from tests.kernel.redis_counts import commands, wait_until
from tests.kernel.sample_actors import Probe

pytestmark = [pytest.mark.queue]


@pytest.mark.django_db(transaction=True)
def test_a_shard_consumer_answers_a_lone_caller_in_two_round_trips(
    private_redis, owner_id, monkeypatch
):
    _, _, admin = private_redis
    writes: Counter[str] = Counter()
    send = transport.Line.send_packed

    def counted(self, payload, count, **options):  # type: ignore[no-untyped-def]
        writes[threading.current_thread().name] += 1
        return send(self, payload, count, **options)

    monkeypatch.setattr(transport.Line, "send_packed", counted)
    stopping = threading.Event()
    consumer = ShardConsumer(0, stopping)
    consumer.start()
    try:
        wait_until(lambda: admin.exists(transport.lease_key(0)), "the consumer's lease")
        assert Probe.call(owner_id, "bump", timeout=30) == 1
        time.sleep(0.2)  # the consumer is back in its idle wait
        admin.config_resetstat()
        writes.clear()
        for n in range(2, 12):
            assert Probe.call(owner_id, "bump", timeout=30) == n
        spent = commands(admin)
        consumed = writes[consumer.name]
    finally:
        stopping.set()
        consumer.join(timeout=30)
    # Per call: the caller's LPUSH and BLPOP (one write); the consumer's idle wait (BLMOVE)
    # and its take (EVALSHA) in one write, its answer-and-take (EVALSHA) in another; and a
    # heartbeat renewal now and then (its own thread and line).
    assert writes[threading.current_thread().name] == 10
    # Plus the wait it is in, and an idle wait that ran out (every 0.5 s) on a stalled host:
    # the old wait-then-take sent 3 a call.
    assert consumed <= 2 * 10 + 3
    assert spent["lpush"] == spent["blpop"] == 10
    assert spent["blmove"] <= 10 + 1  # one wait per call, plus the one it is in
    assert spent["evalsha"] <= 2 * 10 + 2
    top_level = sum(spent.get(name, 0) for name in ("lpush", "blpop", "blmove", "evalsha", "eval"))
    assert top_level <= 5 * 10 + 3
    assert "hello" not in spent and "ping" not in spent


@pytest.mark.django_db(transaction=True)
def test_a_busy_shard_answers_each_batch_in_one_round_trip(private_redis, owner_id, outsider_id):
    _, _, admin = private_redis
    stopping = threading.Event()
    consumer = ShardConsumer(0, stopping)
    consumer.start()
    seen: dict[str, list[int]] = {owner_id: [], outsider_id: []}
    errors: list[BaseException] = []

    def run(user: str) -> None:
        try:
            for _ in range(25):
                seen[user].append(Probe.call(user, "bump", timeout=30))
        except BaseException as exc:
            errors.append(exc)

    try:
        wait_until(lambda: admin.exists(transport.lease_key(0)), "the consumer's lease")
        Probe.call(owner_id, "bump", timeout=30)
        Probe.call(outsider_id, "bump", timeout=30)
        admin.config_resetstat()
        callers = [threading.Thread(target=run, args=(user,)) for user in seen for _ in range(4)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(timeout=120)
        spent = commands(admin)
    finally:
        stopping.set()
        consumer.join(timeout=30)
    assert errors == []
    for revisions in seen.values():
        assert sorted(revisions) == list(range(2, 102))  # exactly once each
    # Under load, answering a batch takes the next: the consumer's round trips per call
    # stay well under the lone caller's three.
    consumer_trips = spent.get("evalsha", 0) + spent.get("blmove", 0)
    assert consumer_trips < 3 * 200
    assert spent["del"] < 200  # one DEL (the in-flight list) per batch: batches formed


def test_the_batch_sizer_cuts_a_take_to_the_time_budget_and_grows_it_back():
    sizer = BatchSizer(most=256, seconds=0.25)
    assert sizer.next() == 256  # nothing seen yet: the cap
    sizer.observe(4, 0.002)  # 0.5 ms a call: the cap decides
    assert sizer.next() == 256
    sizer.observe(10, 0.4)  # 40 ms a call (alarm fires): about 0.25 s worth
    assert sizer.next() == 6
    sizer.observe(1, 3.0)  # one very slow call: still one at a time, never none
    assert sizer.next() == 1
    sizer.observe(6, 0.003)  # cheap again: straight back to the cap
    assert sizer.next() == 256
    assert BatchSizer(most=256, seconds=0).next() == 256  # off
    off = BatchSizer(most=256, seconds=0)
    off.observe(1, 10.0)
    assert off.next() == 256


@pytest.mark.django_db(transaction=True)
def test_after_a_batch_of_slow_calls_the_consumer_takes_fewer(
    private_redis, owner_id, monkeypatch, settings
):
    """The queue holds 40 calls; after a batch whose calls took 0.1 s each (a fake clock), the
    answer-and-take moves only as many as fit the 0.25 s budget, not the 256 cap; after cheap
    ones, all that wait. Every call still runs exactly once."""
    from kody.actors import runtime
    from kody.actors import worker as worker_module

    clock = [1000.0]
    per_call = [0.1]
    real_execute = runtime.execute

    def timed(calls, *args, **kwargs):
        clock[0] += per_call[0] * len(calls)
        return real_execute(calls, *args, **kwargs)

    monkeypatch.setattr(worker_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(runtime, "execute", timed)
    consumer = ShardConsumer(0, threading.Event())
    consumer.sizer.seconds = 0.25
    epoch = consumer._acquire()
    assert epoch is not None
    Probe.cast(owner_id, "bump")
    first = consumer._take(epoch)
    assert len(first) == 1
    for _ in range(40):
        Probe.cast(owner_id, "bump")
    second = consumer._process(first, epoch)  # 0.1 s for one call: the next take is two
    assert len(second) == 2
    per_call[0] = 0.001
    third = consumer._process(second, epoch)  # cheap: everything still queued
    assert len(third) == 38
    assert consumer._process(third, epoch) == []
    settings.KODY_ACTORS_INLINE = True
    assert Probe.call(owner_id, "bump") == 42  # each of the 41 casts ran exactly once
