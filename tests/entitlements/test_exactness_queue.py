"""Exactness under concurrency through the real shard queue and a real Celery worker."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import connections

from apps.entitlements import services
from apps.entitlements.actor import UserMeter
from apps.entitlements.services import LimitReached
from tests.accounts.factories import UserFactory

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

NOON = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)
THREADS = 16
ATTEMPTS_PER_THREAD = 30  # 480 attempts against a free limit of 250


def hammer(user, resource: str, threads: int, attempts: int) -> tuple[int, int]:
    allowed, denied, errors = [0] * threads, [0] * threads, []
    start = threading.Barrier(threads)

    def run(index: int) -> None:
        try:
            start.wait()
            for _ in range(attempts):
                try:
                    services.consume(user.stable_user_id, resource, now=NOON)
                    allowed[index] += 1
                except LimitReached as exc:
                    assert exc.details["used"] == exc.details["limit"]
                    denied[index] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    return sum(allowed), sum(denied)


def test_sixteen_threads_never_pass_the_limit_and_the_count_matches(celery_worker):
    owner = UserFactory(username="ada")
    allowed, denied = hammer(owner, "execute_calls_per_day", THREADS, ATTEMPTS_PER_THREAD)
    assert allowed == 250  # exactly the free limit: not one more
    assert denied == THREADS * ATTEMPTS_PER_THREAD - 250
    final = UserMeter.call(
        owner.stable_user_id, "read", resource="execute_calls_per_day", day="2026-08-20"
    )
    assert final["count"] == allowed
    assert final["revision"] == allowed  # one revision per successful charge, none for denials


def test_inbound_retries_from_many_threads_charge_once(celery_worker):
    owner = UserFactory(username="ada")
    results: list[services.Charge] = []
    lock = threading.Lock()

    def deliver() -> None:
        try:
            for n in range(5):
                charge = services.consume_inbound_delivery(owner, f"delivery-{n}", now=NOON)
                with lock:
                    results.append(charge)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=deliver) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sum(charge.charged for charge in results) == 5
    final = UserMeter.call(
        owner.stable_user_id, "read", resource="email_receives_per_day", day="2026-08-20"
    )
    assert final["count"] == 5


def test_a_timed_out_charge_retried_with_its_key_charges_once(celery_worker, settings):
    from kody.actors import ActorCallTimeout
    from tests.kernel.sample_actors import Probe

    owner, outsider = UserFactory(username="ada"), UserFactory(username="ben")
    uid = owner.stable_user_id
    # A slow call ahead of it on the owner's shard: the charge cannot be answered in time.
    Probe.cast(uid, "slow_echo", "ahead", 1.5)
    settings.KODY_ACTOR_CALL_TIMEOUT = 0.3
    with pytest.raises(ActorCallTimeout) as caught:
        services.consume(uid, "execute_calls_per_day", 3, now=NOON, key="job-7:attempt")
    assert "job-7:attempt" in caught.value.call_id
    settings.KODY_ACTOR_CALL_TIMEOUT = 30
    again = services.consume(uid, "execute_calls_per_day", 3, now=NOON, key="job-7:attempt")
    assert again.count == 3  # the timed-out charge, answered from its record: charged once
    assert services.consume(uid, "execute_calls_per_day", 3, now=NOON, key="job-8").count == 6
    # Another user's charge under the same key is their own.
    other = services.consume(outsider, "execute_calls_per_day", 3, now=NOON, key="job-7:attempt")
    assert other.count == 3
