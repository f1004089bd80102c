"""Actors through the real broker and a real Celery worker (a thread in this process)."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest
from django.db import connection
from django.test import override_settings

from apps.entitlements.actor import UnknownResource, UserMeter
from kody.actors import ActorCallTimeout, OwnerMismatch, transport
from kody.actors.wire import Call, Outcome
from kody.userschema.naming import schema_name_for
from tests.clock import today_iso
from tests.kernel import sample_actors
from tests.kernel.sample_actors import Probe, ProbeFailed

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]


def consume(user: str, limit: int = 100_000) -> dict:
    return UserMeter.call(
        user, "consume", resource="execute_calls_per_day", day=today_iso(), limit=limit
    )


def hammer(users: list[str], threads: int, calls: int) -> dict[str, list[list[int]]]:
    """Each thread makes ``calls`` calls cycling over ``users``; revisions per user per thread."""
    seen: dict[str, list[list[int]]] = defaultdict(lambda: [[] for _ in range(threads)])
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            for n in range(calls):
                user = users[(n + index) % len(users)]
                seen[user][index].append(consume(user)["revision"])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    return seen


def assert_exact(per_thread: list[list[int]], total: int) -> None:
    everything = sorted(rev for revisions in per_thread for rev in revisions)
    assert everything == list(range(1, total + 1))  # each revision seen once
    for revisions in per_thread:
        assert revisions == sorted(revisions)  # each caller sees them in order


def test_eight_threads_times_500_calls_count_exactly_4000(owner_id, celery_worker):
    seen = hammer([owner_id], threads=8, calls=500)
    assert_exact(seen[owner_id], 4000)
    assert (
        UserMeter.call(owner_id, "read", resource="execute_calls_per_day", day=today_iso())["count"]
        == 4000
    )


def test_two_users_interleaved_stay_exact_per_user(owner_id, outsider_id, celery_worker):
    seen = hammer([owner_id, outsider_id], threads=8, calls=250)
    assert_exact(seen[owner_id], 1000)
    assert_exact(seen[outsider_id], 1000)


def test_exceptions_cross_the_queue_with_their_type(owner_id, celery_worker):
    with pytest.raises(UnknownResource):
        UserMeter.call(owner_id, "consume", resource="nope", day=today_iso(), limit=1)
    with pytest.raises(ProbeFailed) as caught:
        Probe.call(owner_id, "fail", "via queue")
    assert caught.value.details == {"why": "via queue"}


def test_a_forged_message_for_another_users_schema_is_refused(owner_id, outsider_id, celery_worker):
    consume(outsider_id)
    forged = Call(
        id="forged-1",
        user_id=owner_id,
        schema=schema_name_for(outsider_id),
        actor=UserMeter.name,
        method="consume",
        kwargs={"resource": "execute_calls_per_day", "day": today_iso(), "limit": 9},
    )
    shard = transport.shard_for(owner_id)
    reply = transport.push_and_wait(shard, forged.encode(), forged.id, timeout=10)
    with pytest.raises(OwnerMismatch):
        Outcome.parse(reply).unwrap()
    assert consume(outsider_id)["count"] == 2


def test_the_workers_search_path_is_public_after_a_failed_call(owner_id, celery_worker):
    sample_actors.seen_connections.clear()
    with pytest.raises(ProbeFailed):
        Probe.call(owner_id, "remember_connection")
    # Seen twice: the group ran once without savepoints, then again with them.
    worker_connection = sample_actors.seen_connections[-1]
    with worker_connection.cursor() as cursor:  # the worker is idle again: its session state
        cursor.execute("SELECT current_setting('search_path')")
        assert cursor.fetchone()[0] == '"$user", public'


def test_cast_returns_at_once_and_the_call_still_runs(owner_id, celery_worker):
    key = UserMeter.cast(
        owner_id, "consume", resource="email_sends_per_day", day=today_iso(), limit=5
    )
    assert isinstance(key, str)
    assert (
        UserMeter.call(
            owner_id, "consume", resource="email_sends_per_day", day=today_iso(), limit=5
        )["count"]
        == 2
    )


@override_settings(KODY_ACTOR_SHARDS=64)
def test_a_call_nobody_answers_times_out_with_a_typed_error(owner_id, celery_worker):
    user = next(u for u in (f"{n:064x}" for n in range(1000)) if transport.shard_for(u) >= 4)
    with pytest.raises(ActorCallTimeout) as caught:
        Probe.call(user, "whoami", timeout=0.3)
    assert caught.value.call_id
    transport.client().delete(transport.queue_key(transport.shard_for(user)))


def test_search_path_of_this_process_is_untouched_by_queue_calls(owner_id, celery_worker):
    consume(owner_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        assert cursor.fetchone()[0] == '"$user", public'


def test_a_call_may_wait_longer_than_the_redis_clients_default_socket_timeout(
    owner_id, celery_worker
):
    from kody.actors.transport import client

    assert client().connection_pool.connection_kwargs["socket_timeout"] is None


def test_a_base_exception_from_a_method_fails_that_call_and_the_shard_goes_on(
    owner_id, celery_worker
):
    from kody.actors import ActorError

    with pytest.raises(ActorError, match="ProbePanic"):
        Probe.call(owner_id, "panic", timeout=10)
    assert Probe.call(owner_id, "bump", timeout=10) == 1  # the panic rolled its bump back
    shard = transport.shard_for(owner_id)
    assert transport.client().llen(transport.inflight_key(shard)) == 0  # nothing to replay


def test_two_users_with_the_same_idempotency_key_get_their_own_replies(
    owner_id, outsider_id, celery_worker
):
    # The owner's call times out; its reply arrives later and waits under the key.
    with pytest.raises(ActorCallTimeout):
        Probe.call(owner_id, "slow_echo", "owner", 0.5, timeout=0.1, idempotency_key="shared")
    import time

    time.sleep(1.0)
    reply = Probe.call(outsider_id, "slow_echo", "outsider", 0, idempotency_key="shared")
    assert reply == {"value": "outsider", "user": outsider_id}
    # The owner's retry with the same key answers from its own record, never reruns.
    again = Probe.call(owner_id, "slow_echo", "changed", 0, idempotency_key="shared")
    assert again == {"value": "owner", "user": owner_id}
