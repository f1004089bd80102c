"""Actor semantics through the inline path (KODY_ACTORS_INLINE=1): same runtime, no worker."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.entitlements.actor import UnknownResource, UserMeter
from kody.actors import OwnerMismatch, UnknownMethod
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from kody.userschema.scope import user_schema_scope
from tests.clock import today_iso
from tests.kernel.sample_actors import Probe, ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)


def consume(user: str, limit: int = 3, **extra: object) -> dict:
    return UserMeter.call(
        user, "consume", resource="execute_calls_per_day", day=today_iso(), limit=limit, **extra
    )


def search_path() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        return cursor.fetchone()[0]


def test_consume_charges_until_the_limit_then_denies(owner_id, inline_actors):
    readings = [consume(owner_id, limit=2) for _ in range(3)]
    assert [(r["allowed"], r["count"], r["revision"]) for r in readings] == [
        (True, 1, 1),
        (True, 2, 2),
        (False, 2, 2),
    ]
    assert (
        UserMeter.call(owner_id, "read", resource="execute_calls_per_day", day=today_iso())["count"]
        == 2
    )


def test_counters_are_per_user(owner_id, outsider_id, inline_actors):
    consume(owner_id)
    consume(owner_id)
    assert consume(outsider_id)["count"] == 1


def test_cold_bootstrap_prunes_days_older_than_seven(owner_id, inline_actors):
    today = timezone.now().date()
    old, recent = today - timedelta(days=8), today - timedelta(days=7)
    for day in (old, recent):
        UserMeter.call(
            owner_id, "consume", resource="job_runs_per_day", day=day.isoformat(), limit=9
        )
    UserMeter.call(owner_id, "consume", resource="job_runs_per_day", day=today.isoformat(), limit=9)

    def read(day: date) -> dict:
        return UserMeter.call(owner_id, "read", resource="job_runs_per_day", day=day.isoformat())

    assert read(old)["count"] == 0
    assert read(recent)["count"] == 1


def test_an_actor_exception_reaches_the_caller_with_its_type(owner_id, inline_actors):
    with pytest.raises(UnknownResource):
        UserMeter.call(owner_id, "consume", resource="nope", day=today_iso(), limit=1)
    with pytest.raises(ProbeFailed) as caught:
        Probe.call(owner_id, "fail", "boom")
    assert caught.value.details == {"why": "boom"} and caught.value.code == "probe_failed"


def test_an_unknown_method_is_refused_before_dispatch(owner_id, inline_actors):
    with pytest.raises(UnknownMethod):
        UserMeter.call(owner_id, "_charge")
    with pytest.raises(UnknownMethod):
        UserMeter.call(owner_id, "set_alarm")


def test_the_same_idempotency_key_applies_once(owner_id, inline_actors):
    first = consume(owner_id, limit=9, idempotency_key="retry-1")
    again = consume(owner_id, limit=9, idempotency_key="retry-1")
    assert first == again and first["count"] == 1
    assert consume(owner_id, limit=9)["count"] == 2


def test_a_call_for_another_users_schema_is_refused(owner_id, outsider_id, inline_actors):
    consume(owner_id)
    consume(outsider_id)
    forged = Call(
        id="forged",
        user_id=owner_id,
        schema=schema_name_for(outsider_id),
        actor=UserMeter.name,
        method="consume",
        kwargs={"resource": "execute_calls_per_day", "day": today_iso(), "limit": 9},
    )
    [outcome] = execute([forged])
    with pytest.raises(OwnerMismatch):
        outcome.unwrap()
    assert consume(outsider_id)["count"] == 2  # nothing was charged to the outsider


def test_search_path_is_public_after_every_call(owner_id, inline_actors):
    before = search_path()
    assert Probe.call(owner_id, "whoami")["search_path"].startswith(schema_name_for(owner_id))
    assert search_path() == before
    with pytest.raises(ProbeFailed):
        Probe.call(owner_id, "fail", "x")
    assert search_path() == before


def test_search_path_is_restored_inside_a_callers_transaction(owner_id, inline_actors):
    with transaction.atomic():
        before = search_path()
        Probe.call(owner_id, "whoami")
        assert search_path() == before
        with pytest.raises(ProbeFailed):
            Probe.call(owner_id, "fail", "x")
        assert search_path() == before


def test_group_commit_isolates_a_failing_call(owner_id, inline_actors):
    consume(owner_id, limit=99)
    calls = [
        Call(
            id=f"c{n}",
            user_id=owner_id,
            schema=schema_name_for(owner_id),
            actor=Probe.name,
            method=m,
            args=a,
        )
        for n, (m, a) in enumerate([("bump", []), ("fail", ["no"]), ("bump", [])])
    ]
    outcomes = execute(calls)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert [outcomes[0].unwrap(), outcomes[2].unwrap()] == [2, 3]  # fail's bump was rolled back


def test_the_scope_refuses_to_run_outside_a_transaction(owner_id):
    with pytest.raises(transaction.TransactionManagementError):
        with user_schema_scope(schema_name_for(owner_id)):
            pass


def test_a_batch_over_several_users_commits_together_and_isolates_failures(
    owner_id, outsider_id, inline_actors
):
    consume(owner_id, limit=99)
    consume(outsider_id, limit=99)

    def call(n: int, user: str, method: str, *args: object, schema_of: str | None = None) -> Call:
        return Call(
            id=f"b{n}",
            user_id=user,
            schema=schema_name_for(schema_of or user),
            actor=Probe.name,
            method=method,
            args=list(args),
        )

    calls = [
        call(0, owner_id, "bump"),
        call(1, outsider_id, "bump"),
        call(2, owner_id, "fail", "no"),
        call(3, outsider_id, "bump"),
        call(4, owner_id, "bump", schema_of=outsider_id),  # forged: refused, nothing recorded
        call(5, owner_id, "bump"),
    ]
    outcomes = execute(calls)
    assert [o.ok for o in outcomes] == [True, True, False, True, False, True]
    with pytest.raises(OwnerMismatch):
        outcomes[4].unwrap()
    with pytest.raises(ProbeFailed):
        outcomes[2].unwrap()
    values = [outcomes[i].unwrap() for i in (0, 1, 3, 5)]
    assert values == [2, 2, 3, 3]  # the failing call's bump was rolled back, nobody else's
    assert search_path() == '"$user", public'
    # Redelivered (a worker died before answering): answered from the records, applied once.
    again = execute(calls)
    assert [again[i].unwrap() for i in (0, 1, 3, 5)] == values
    with pytest.raises(ProbeFailed):
        again[2].unwrap()
    assert Probe.call(owner_id, "bump") == 4
    assert Probe.call(outsider_id, "bump") == 4
