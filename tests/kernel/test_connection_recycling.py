"""Bounded backend memory (issue 16): a shard consumer's connection is recycled once it has
touched K schemas or its backend's memory passes a limit — counted, never timed."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import recycle
from kody.actors.recycle import Recycler, backend_memory_bytes
from tests.clock import today_iso

pytestmark = pytest.mark.django_db(transaction=True)


def _consume(user: str) -> dict:
    return UserMeter.call(
        user, "consume", resource="execute_calls_per_day", day=today_iso(), limit=1000
    )


def test_the_connection_is_recycled_after_k_distinct_schemas(settings):
    settings.KODY_ACTOR_RECYCLE_SCHEMAS = 3
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 0
    recycler = Recycler()
    connection.ensure_connection()
    first = connection.connection
    assert recycler.after_batch(["a", "b"]) is None
    assert recycler.after_batch(["a", "b", "a"]) is None  # the same schemas count once
    assert connection.connection is first
    assert recycler.after_batch(["c"]) == "schemas"
    assert connection.connection is None and recycler.recycled == 1
    # A fresh connection starts a fresh count.
    connection.ensure_connection()
    assert recycler.after_batch(["a", "b"]) is None
    assert recycler.after_batch(["d"]) == "schemas"
    assert recycler.recycled == 2


def test_the_connection_is_recycled_once_the_backend_holds_too_much(settings, monkeypatch):
    settings.KODY_ACTOR_RECYCLE_SCHEMAS = 0
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 1  # any backend holds more than a megabyte
    monkeypatch.setattr(recycle, "CHECK_EVERY", 2)
    recycler = Recycler()
    connection.ensure_connection()
    assert backend_memory_bytes() > 1024 * 1024
    assert recycler.after_batch(["a"]) is None  # not looked at before CHECK_EVERY new schemas
    assert recycler.after_batch(["a"]) is None
    assert recycler.after_batch(["b"]) == "memory"
    assert connection.connection is None


def test_both_triggers_off_never_recycle(settings):
    settings.KODY_ACTOR_RECYCLE_SCHEMAS = 0
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 0
    recycler = Recycler()
    connection.ensure_connection()
    for n in range(200):
        assert recycler.after_batch([f"user-{n}"]) is None
    assert connection.connection is not None and recycler.recycled == 0


@pytest.mark.queue
def test_a_shard_consumer_recycles_between_batches_and_answers_every_call(
    owner_id, outsider_id, celery_worker, settings
):
    settings.KODY_ACTOR_RECYCLE_SCHEMAS = 1  # every batch touches one schema: recycle each
    before = Recycler.total
    revisions = [_consume(owner_id)["revision"] for _ in range(3)]
    assert revisions == [1, 2, 3]
    assert _consume(outsider_id)["revision"] == 1  # the other user is unaffected
    # Recycled after each answered batch: at least the two before the last call ran.
    assert Recycler.total - before >= 2
