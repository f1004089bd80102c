"""Bounded backend memory: a shard consumer's connection is recycled once its backend's
measured memory passes the limit — never after a count of schemas while the memory can be
read; a role that may not read it falls back to a budget of schemas. Counted, never timed."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from apps.entitlements.actor import UserMeter
from kody.actors import recycle
from kody.actors.recycle import FALLBACK_KB_PER_SCHEMA, Recycler, backend_memory_bytes
from kody.dbpool import without_pool
from tests.clock import today_iso

pytestmark = pytest.mark.django_db(transaction=True)


def _consume(user: str) -> dict:
    return UserMeter.call(
        user, "consume", resource="execute_calls_per_day", day=today_iso(), limit=1000
    )


@pytest.fixture
def measurable(monkeypatch):  # type: ignore[no-untyped-def]
    """A process that has not yet found the memory unreadable (restored afterwards)."""
    monkeypatch.setattr(Recycler, "unmeasurable", False)


def test_the_connection_is_recycled_once_the_backend_holds_too_much(
    settings, monkeypatch, measurable
):
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 1  # any backend holds more than a megabyte
    monkeypatch.setattr(recycle, "CHECK_EVERY", 2)
    recycler = Recycler()
    connection.ensure_connection()
    assert backend_memory_bytes() > 1024 * 1024
    assert recycler.after_batch(["a"]) is None  # not looked at before CHECK_EVERY new schemas
    assert recycler.after_batch(["a"]) is None  # the same schema again is not new
    assert recycler.after_batch(["b"]) == "memory"
    assert connection.connection is None and recycler.recycled == 1


def test_a_fleet_whose_backend_stays_under_the_limit_keeps_its_connection(settings, measurable):
    # Thousands of schemas served, the memory looked at every CHECK_EVERY of them: no count
    # of schemas closes a connection whose backend is within its limit.
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 224
    recycler = Recycler()
    connection.ensure_connection()
    first = connection.connection
    for batch in range(40):
        assert recycler.after_batch([f"user-{batch}-{n}" for n in range(64)]) is None
    assert connection.connection is first and recycler.recycled == 0
    assert backend_memory_bytes() < 224 * 1024 * 1024


def test_the_limit_at_zero_never_recycles(settings, measurable):
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 0
    recycler = Recycler()
    connection.ensure_connection()
    for n in range(200):
        assert recycler.after_batch([f"user-{n}"]) is None
    assert connection.connection is not None and recycler.recycled == 0


def test_a_role_that_cannot_read_the_memory_falls_back_to_a_budget_of_schemas(
    settings, monkeypatch, measurable
):
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 1  # a budget of 1024 / 128 = 8 schemas
    monkeypatch.setattr(recycle, "CHECK_EVERY", 2)
    budget = 1024 // FALLBACK_KB_PER_SCHEMA
    # As a shard consumer's: closing must end the session (and the role with it), never hand
    # a connection that changed its role back to the process's pool for the next test.
    pooled = {alias: connections[alias].settings_dict for alias in connections}
    without_pool()
    with connection.cursor() as cursor:
        cursor.execute("DROP ROLE IF EXISTS kody_test_no_stats")
        cursor.execute("CREATE ROLE kody_test_no_stats NOLOGIN")
    try:
        with connection.cursor() as cursor:
            # As a role without pg_read_all_stats, as on a managed server.
            cursor.execute("SET ROLE kody_test_no_stats")
        recycler = Recycler()
        assert recycler.after_batch(["s0"]) is None
        # The first look is refused: no recycling for that, the budget applies from now on.
        assert recycler.after_batch(["s1"]) is None
        assert Recycler.unmeasurable is True
        for n in range(2, budget - 1):
            assert recycler.after_batch([f"s{n}"]) is None
        assert recycler.after_batch([f"s{budget - 1}"]) == "schemas"
        assert connection.connection is None  # closed: the role went with the session
    finally:
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("DROP ROLE IF EXISTS kody_test_no_stats")
        connection.close()
        for alias, settings_dict in pooled.items():
            connections[alias].settings_dict = settings_dict


@pytest.mark.queue
def test_a_shard_consumer_recycles_between_batches_and_answers_every_call(
    owner_id, outsider_id, celery_worker, settings, monkeypatch, measurable
):
    # Every new schema measured against a limit any backend passes: recycle after each batch.
    settings.KODY_ACTOR_RECYCLE_MEMORY_MB = 1
    monkeypatch.setattr(recycle, "CHECK_EVERY", 1)
    before = Recycler.total
    revisions = [_consume(owner_id)["revision"] for _ in range(3)]
    assert revisions == [1, 2, 3]
    assert _consume(outsider_id)["revision"] == 1  # the other user is unaffected
    # Recycled after each answered batch: at least the two before the last call ran.
    assert Recycler.total - before >= 2
