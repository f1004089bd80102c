"""The enforcement API other apps call: consume / assert_within / LimitReached."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.accounts.models import User
from apps.entitlements import services
from apps.entitlements.services import LimitReached
from kody.errors import KodyError
from tests.packages.factories import UserStorageBucketFactory

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)
ACTOR_TABLES = {"daily_counters", "inbound_delivery_claims", "actor_calls"}


def exhaust(user, resource: str, *, now=NOON) -> int:
    allowed = 0
    while True:
        try:
            services.consume(user, resource, now=now)
        except LimitReached:
            return allowed
        allowed += 1


def test_free_plan_sends_ten_emails_then_gets_a_typed_limit_error(owner):
    assert exhaust(owner, "email_sends_per_day") == 10
    with pytest.raises(LimitReached) as caught:
        services.consume(owner, "email_sends_per_day", now=NOON)
    error = caught.value
    assert isinstance(error, KodyError)
    assert (error.code, error.status) == ("limit_reached", 429)
    assert error.details == {
        "resource": "email_sends_per_day",
        "limit": 10,
        "plan": "free",
        "used": 10,
        "resets_at": "2026-08-21T00:00:00+00:00",
    }
    assert "resets at 2026-08-21 00:00 UTC" in error.message


def test_consume_returns_the_charge(owner):
    charge = services.consume(owner, "execute_calls_per_day", 3, now=NOON)
    assert (charge.count, charge.limit, charge.plan.value) == (3, 250, "free")
    assert charge.resets_at == datetime(2026, 8, 21, tzinfo=UTC)


def test_a_stable_user_id_works_as_well_as_a_user(owner):
    services.consume(owner.stable_user_id, "job_runs_per_day", now=NOON)
    assert services.consume(owner, "job_runs_per_day", now=NOON).count == 2


def test_the_day_rolls_over_at_utc_midnight(owner):
    before = datetime(2026, 8, 20, 23, 59, 59, 999_000, tzinfo=UTC)
    after = datetime(2026, 8, 21, 0, 0, 0, tzinfo=UTC)
    assert exhaust(owner, "email_sends_per_day", now=before) == 10
    charge = services.consume(owner, "email_sends_per_day", now=after)
    assert charge.count == 1
    assert charge.resets_at == datetime(2026, 8, 22, tzinfo=UTC)


def test_midnight_is_utc_even_for_an_offset_clock(owner):
    from zoneinfo import ZoneInfo

    late_in_utc = datetime(2026, 8, 20, 20, 30, tzinfo=ZoneInfo("America/New_York"))  # 00:30 UTC
    charge = services.consume(owner, "job_runs_per_day", now=late_in_utc)
    assert charge.resets_at == datetime(2026, 8, 22, tzinfo=UTC)


def test_a_plan_change_takes_effect_on_the_next_call(owner, django_capture_on_commit_callbacks):
    exhaust(owner, "email_sends_per_day")
    with django_capture_on_commit_callbacks(execute=True):
        owner.plan = "standard"
        owner.save()
    assert services.consume(owner, "email_sends_per_day", now=NOON).limit == 200


def test_stripe_standard_and_overlays_raise_the_limit(owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        owner.second_agent_standard_gift_expires_at = datetime.now(UTC) + timedelta(days=14)
        owner.save()
    assert services.consume(owner, "execute_calls_per_day", now=NOON).limit == 5_000


def test_warm_consume_reads_no_users_row_and_writes_only_actor_tables(owner):
    services.consume(owner, "execute_calls_per_day", now=NOON)  # warms plan cache and the day row
    with CaptureQueriesContext(connection) as queries:
        services.consume(owner, "execute_calls_per_day", now=NOON)
    sql = "\n".join(q["sql"] for q in queries.captured_queries)
    assert not re.search(r"\busers\b", sql)  # the plan came from the cache
    # The kernel writes call records schema-qualified ("u_….actor_calls"): the table counts.
    written = set(
        re.findall(r"(?<!FOR )(?:INSERT INTO|UPDATE|DELETE FROM)\s+(?:\"?u_\w+\"?\.)?\"?(\w+)", sql)
    )
    assert written <= ACTOR_TABLES, written - ACTOR_TABLES


def test_refund_gives_units_back(owner):
    exhaust(owner, "email_sends_per_day")
    assert services.refund(owner, "email_sends_per_day", 2, now=NOON) == 8
    assert services.consume(owner, "email_sends_per_day", now=NOON).count == 9


def test_inbound_delivery_retries_charge_once_through_the_service(owner):
    first = services.consume_inbound_delivery(owner, "msg-1", now=NOON)
    again = services.consume_inbound_delivery(owner, "msg-1", now=NOON)
    assert (first.charged, first.count) == (True, 1)
    assert (again.charged, again.count) == (False, 1)


def test_inbound_deliveries_stop_at_the_receive_limit(owner):
    for n in range(50):
        services.consume_inbound_delivery(owner, f"m{n}", now=NOON)
    with pytest.raises(LimitReached) as caught:
        services.consume_inbound_delivery(owner, "m50", now=NOON)
    assert caught.value.details["resource"] == "email_receives_per_day"


def test_assert_within_checks_without_charging(owner):
    services.assert_within(owner, "email_sends_per_day", now=NOON)
    exhaust(owner, "email_sends_per_day")
    with pytest.raises(LimitReached):
        services.assert_within(owner, "email_sends_per_day", now=NOON)
    assert services.refund(owner, "email_sends_per_day", 0 + 1, now=NOON) == 9


def test_assert_within_a_byte_cap(owner):
    services.assert_within(owner, "email_message_bytes", 256 * 1024)
    with pytest.raises(LimitReached) as caught:
        services.assert_within(owner, "email_message_bytes", 256 * 1024 + 1)
    assert caught.value.details["resets_at"] is None


def test_assert_within_storage_counts_bucket_estimates(owner):
    UserStorageBucketFactory(
        user_id=owner.stable_user_id,
        storage_id="job:1",
        kind="job",
        estimated_bytes=16 * 1024 * 1024,
    )
    with pytest.raises(LimitReached):
        services.assert_within(owner, "storage_bytes")
    with pytest.raises(LimitReached):
        services.reserve_storage_bytes(owner, 1)


def test_reserve_storage_bytes_up_to_the_plan_cap(owner):
    services.reserve_storage_bytes(owner, 16 * 1024 * 1024 - 10)
    with pytest.raises(LimitReached) as caught:
        services.reserve_storage_bytes(owner, 11)
    assert caught.value.details["limit"] == 16 * 1024 * 1024
    assert services.reserve_storage_bytes(owner, 10).count == 16 * 1024 * 1024


def test_consume_refuses_a_non_daily_resource(owner):
    with pytest.raises(services.NotMetered):
        services.consume(owner, "repos")


def test_an_outsiders_consumption_never_touches_the_owners_meter(owner, outsider):
    exhaust(outsider, "email_sends_per_day")
    assert services.consume(owner, "email_sends_per_day", now=NOON).count == 1


def test_a_deleted_account_has_no_plan(owner):
    uid = owner.stable_user_id
    User.objects.filter(pk=owner.pk).delete()
    with pytest.raises(User.DoesNotExist):
        services.consume(uid, "execute_calls_per_day")
