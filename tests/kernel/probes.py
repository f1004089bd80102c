"""Building blocks for tests that drive the kernel's runtime directly: a ``Call`` to the
``Probe`` actor, and another connection holding a user's owner lock."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from kody.actors import transport
from kody.actors.wire import Call
from kody.actors.worker import ShardConsumer
from kody.userschema.naming import schema_name_for
from tests.kernel.conftest import _wait_for_leases, new_user_id
from tests.kernel.sample_actors import Probe


def probed_users(n: int) -> list[str]:
    """``n`` new users in ascending id order, each with its schema, tables and today's counter
    row (one inline ``Probe.bump``; the caller has set ``KODY_ACTORS_INLINE``)."""
    ids = sorted(new_user_id() for _ in range(n))
    for user in ids:
        Probe.call(user, "bump")
    return ids


def metered_users(n: int, *, day: str, limit: int) -> list[str]:
    """``n`` new users in ascending id order, each with ``day``'s ``execute_calls_per_day``
    counter row (one inline ``UserMeter.consume``, so the next charge has a row to answer
    from; the caller has set ``KODY_ACTORS_INLINE``)."""
    from apps.entitlements.actor import UserMeter

    ids = sorted(new_user_id() for _ in range(n))
    for user in ids:
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=day, limit=limit)
    return ids


def probe_call(
    user: str, method: str, *args: object, schema_of: str | None = None, **kw: object
) -> Call:
    """A fresh call of ``Probe.method`` (or ``actor=…``) for ``user``; ``schema_of`` forges the
    schema another user's."""
    return Call(
        id=uuid.uuid4().hex,
        user_id=user,
        schema=schema_name_for(schema_of or user),
        actor=kw.pop("actor", Probe.name),  # type: ignore[arg-type]
        method=method,
        args=list(args),
        kwargs=dict(kw),
    )


@contextmanager
def owner_lock_held(user: str) -> Iterator[None]:
    """While the block runs, another thread's open transaction holds ``user``'s owner lock
    (an inline ``Probe.bump`` inside ``atomic()``); it commits when the block ends."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Probe.call(user, "bump")
                holding.set()
                release.wait(20)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(20), "the holder never took the lock"
        yield
    finally:
        release.set()
        holder.join()


@contextmanager
def round_trips() -> Iterator[list[str]]:
    """The SQL of every round trip the default connection makes while the block runs, from
    Django's query log (one entry per query sent: a statement of a method, or one of the
    kernel's multi-statement queries). The list fills when the block ends. Django also logs
    ``BEGIN`` when an ``atomic()`` block opens and ``COMMIT`` when it ends, and psycopg
    sends neither then (``BEGIN`` goes out with the first query; the kernel's last query
    committed), so those two markers are left out; ``ROLLBACK`` is a round trip and stays."""
    sent: list[str] = []
    with CaptureQueriesContext(connection) as captured:
        yield sent
    markers = {"BEGIN", "COMMIT"}
    sent.extend(q["sql"] for q in captured.captured_queries if q["sql"] not in markers)


def counter(user: str) -> int:
    """``Probe``'s counter for today as it was before this read's own bump."""
    return Probe.call(user, "bump") - 1


def wait_until(condition: Any, what: str, timeout: float = 30) -> None:
    """Poll ``condition`` every 50 ms until it holds; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@contextmanager
def consuming(shards: int) -> Iterator[None]:
    """Shard consumers for shards ``0 .. shards - 1`` on the Redis the settings name (the
    caller has pointed ``KODY_ACTOR_REDIS_URL`` at it), inside the block once each holds its
    lease; on leaving, stopped, with nothing left in flight and every lease released."""
    stopping = threading.Event()
    consumers = [ShardConsumer(shard, stopping) for shard in range(shards)]
    for consumer in consumers:
        consumer.start()
    try:
        _wait_for_leases(shards, timeout=30)
        yield
    finally:
        stopping.set()
        for consumer in consumers:
            consumer.join(timeout=30)
    client = transport.client()
    for shard in range(shards):
        assert client.llen(transport.inflight_key(shard)) == 0
        assert not client.exists(transport.lease_key(shard))  # released on the way out


def bump_through_the_queue(user: str) -> None:
    """``user``'s Probe counter through the shard queue: calls answered in order, a cast
    applied before the next call, the cast's key again applying nothing, and the call
    answered as this user."""
    assert [Probe.call(user, "bump", timeout=30) for _ in range(3)] == [1, 2, 3]
    key = Probe.cast(user, "bump")
    assert isinstance(key, str)
    assert Probe.call(user, "bump", timeout=30) == 5
    assert Probe.cast(user, "bump", idempotency_key=key) == key
    assert Probe.call(user, "bump", timeout=30) == 6
    assert Probe.call(user, "whoami", timeout=30)["user"] == user
