"""The usage buffer's drain: every buffered event lands in ``usage_events`` exactly once, with
two lanes draining at the same time and with a drainer that dies holding its batch."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import time_machine
from django.db import connections
from django.db.models import Count
from django.utils import timezone

from apps.entitlements.models import UsageEvent
from apps.entitlements.services import usage

N = 2000


def _buffer(uid: str, n: int = N) -> None:
    for start in range(0, n, 500):
        usage.record_usage(uid, "execute", count=min(500, n - start))


def _no_duplicates() -> None:
    repeated = UsageEvent.objects.values("event_key").annotate(n=Count("id")).filter(n__gt=1)
    assert not repeated.exists()


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_drains_insert_each_event_exactly_once(owner):
    _buffer(owner.stable_user_id)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            start.wait(timeout=30)
            usage.drain_buffer(batch=50)
        except BaseException as exc:  # noqa: BLE001 - the test refuses it below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=drain) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert UsageEvent.objects.count() == N
    _no_duplicates()
    assert usage.drain_buffer() == 0  # nothing left behind, nothing held


@pytest.mark.django_db(transaction=True)
def test_a_drain_that_dies_holding_its_batch_loses_nothing(owner, monkeypatch):
    _buffer(owner.stable_user_id, 300)

    def dies(*args: object, **kwargs: object) -> None:
        raise RuntimeError("worker killed between taking the batch and inserting it")

    with monkeypatch.context() as patched:
        patched.setattr(UsageEvent.objects, "bulk_create", dies)
        with pytest.raises(RuntimeError):
            usage.drain_buffer(batch=100)
    assert UsageEvent.objects.count() == 0

    # While the batch might still belong to a live drainer, another drain leaves it alone...
    assert usage.drain_buffer() == 200
    assert UsageEvent.objects.count() == 200
    # ...and once it is stale, the next drain inserts it.
    with time_machine.travel(timezone.now() + usage.STALE_AFTER + timedelta(minutes=1)):
        usage.drain_buffer()
    assert UsageEvent.objects.count() == 300
    _no_duplicates()


@pytest.mark.django_db
def test_a_batch_recovered_after_it_was_inserted_adds_no_copy(owner):
    # The test's wrapping transaction never commits, so the drain's "forget the batch" step
    # never runs: exactly a drainer that died after inserting.
    _buffer(owner.stable_user_id, 40)
    usage.drain_buffer()
    assert UsageEvent.objects.count() == 40
    with time_machine.travel(timezone.now() + usage.STALE_AFTER + timedelta(minutes=1)):
        assert usage.drain_buffer() == 40  # recovered and offered again
    assert UsageEvent.objects.count() == 40
    _no_duplicates()


@pytest.mark.django_db
def test_recording_the_same_identity_twice_keeps_one_copy(owner, outsider):
    usage.record_usage(owner.stable_user_id, "execute", count=2, identity="charge-1")
    usage.record_usage(owner.stable_user_id, "execute", count=2, identity="charge-1")
    usage.record_usage(outsider.stable_user_id, "execute", count=1)
    usage.record_usage(outsider.stable_user_id, "execute", count=1)
    usage.drain_buffer()
    assert UsageEvent.objects.filter(user_id=owner.stable_user_id).count() == 2
    assert UsageEvent.objects.filter(user_id=outsider.stable_user_id).count() == 2
