"""The UserMeter actor's RPCs (inline: same runtime and transaction as the queue path)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.entitlements.actor import USER_METER_VERSION, UnknownResource, UserMeter
from kody.userschema.naming import schema_name_for
from tests.packages.factories import McpUserServerInstructionsFactory

pytestmark = pytest.mark.django_db

DAY = timezone.now().date().isoformat()  # paths without a day prune by today
R = "execute_calls_per_day"


def meter(user, method: str, **kwargs):
    return UserMeter.call(user.stable_user_id, method, **kwargs)


def consume(user, limit: int = 10, amount: int = 1, day: str = DAY, resource: str = R, **kw):
    return meter(user, "consume", resource=resource, day=day, limit=limit, amount=amount, **kw)


def rows(user, table: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT * FROM "{schema_name_for(user.stable_user_id)}".{table} ORDER BY 1, 2'
        )
        return cursor.fetchall()


def shifted(days: int, day: str = DAY) -> str:
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


# --- daily counters -----------------------------------------------------------------------------


def test_the_charge_sends_one_sql_text_alone_or_as_its_method(owner):
    """A day's first charge runs the method (no row to answer from yet); the next one goes
    out as the kernel's one statement. Both send the same charge text."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as first:
        consume(owner, day=shifted(-1))
    with CaptureQueriesContext(connection) as second:
        consume(owner, day=shifted(-1))
    charge = "UPDATE daily_counters SET count = count + 1, revision = revision + 1"
    by_method = [q["sql"] for q in first.captured_queries if charge in q["sql"]]
    alone = [q["sql"] for q in second.captured_queries if charge in q["sql"]]
    assert len(alone) == 1
    methods = [sql for sql in by_method if "actor_calls" not in sql]
    assert len(methods) == 2  # the method's charge, then again after its bootstrap
    for sql in methods:
        ctes, select = sql.removeprefix("WITH ").split("\nSELECT json_build_object", 1)
        assert ctes in alone[0] and f"SELECT json_build_object{select}" in alone[0]


def test_consume_allows_up_to_the_limit_and_denies_without_charging(owner):
    assert [consume(owner, limit=3)["count"] for _ in range(3)] == [1, 2, 3]
    denied = consume(owner, limit=3)
    assert (denied["allowed"], denied["count"], denied["remaining"]) == (False, 3, 0)
    assert meter(owner, "read", resource=R, day=DAY)["count"] == 3


def test_a_charge_that_does_not_fit_is_refused_whole(owner):
    consume(owner, limit=5, amount=4)
    assert consume(owner, limit=5, amount=2)["allowed"] is False
    assert consume(owner, limit=5, amount=1)["count"] == 5


def test_revisions_are_monotonic(owner):
    assert [consume(owner)["revision"] for _ in range(3)] == [1, 2, 3]
    meter(owner, "refund", resource=R, day=DAY, amount=1)
    assert consume(owner)["revision"] == 5


def test_cold_bootstrap_answers_needs_bootstrap_then_initialize_is_insert_if_absent(owner):
    assert consume(owner, bootstrap=False)["needs_bootstrap"] is True
    assert meter(owner, "read", resource=R, day=DAY)["needs_bootstrap"] is True
    assert meter(owner, "initialize", resource=R, day=DAY)["created"] is True
    assert meter(owner, "initialize", resource=R, day=DAY)["created"] is False
    assert consume(owner, bootstrap=False)["count"] == 1
    assert meter(owner, "initialize", resource=R, day=DAY, count=0)["created"] is False
    assert meter(owner, "read", resource=R, day=DAY)["count"] == 1  # never reset by a bootstrap


def test_unknown_resources_and_bad_amounts_are_refused(owner):
    with pytest.raises(UnknownResource):
        consume(owner, resource="repos")
    with pytest.raises(ValueError):
        consume(owner, amount=0)


def test_refund_never_goes_below_zero(owner):
    consume(owner, amount=2)
    assert meter(owner, "refund", resource=R, day=DAY, amount=5)["count"] == 0


def test_read_day_lists_every_daily_resource(owner):
    consume(owner, amount=2)
    consume(owner, resource="email_sends_per_day")
    day = meter(owner, "read_day", day=DAY)
    assert day == {
        "email_receives_per_day": 0,
        "email_sends_per_day": 1,
        "execute_calls_per_day": 2,
        "job_runs_per_day": 0,
        "outbound_fetches_per_day": 0,
    }


def test_days_are_counted_separately(owner):
    consume(owner, limit=1)
    assert consume(owner, limit=1)["allowed"] is False
    assert consume(owner, limit=1, day=shifted(1))["allowed"] is True


# --- seven-day self-pruning ---------------------------------------------------------------------


def _seed_old_rows(owner) -> None:
    for days_ago in (8, 7):
        day = shifted(-days_ago)
        consume(owner, day=day)
        meter(
            owner,
            "consume_inbound_delivery",
            delivery_id=f"d-{days_ago}",
            resource="email_receives_per_day",
            day=day,
            limit=50,
        )


@pytest.mark.parametrize(
    ("method", "kwargs"),
    [
        ("consume", {"resource": R, "day": DAY, "limit": 10}),
        ("read", {"resource": R, "day": DAY}),
        ("read_day", {"day": DAY}),
        ("refund", {"resource": R, "day": DAY}),
        ("snapshot", {"day": DAY}),
    ],
)
def test_every_path_prunes_counters_and_claims_older_than_seven_days(owner, method, kwargs):
    _seed_old_rows(owner)
    meter(owner, method, **kwargs)
    cutoff = date.fromisoformat(shifted(-7))
    assert {r[1] for r in rows(owner, "daily_counters")} - {date.fromisoformat(DAY)} == {cutoff}
    assert {r[2] for r in rows(owner, "inbound_delivery_claims")} == {cutoff}


def test_paths_without_a_day_prune_relative_to_today(owner):
    today = timezone.now().date()
    consume(owner, day=(today - timedelta(days=9)).isoformat())
    meter(owner, "read_storage_bytes")
    assert rows(owner, "daily_counters") == []


# --- inbound delivery idempotency ---------------------------------------------------------------


def inbound(owner, delivery: str, limit: int = 50, day: str = DAY):
    return meter(
        owner,
        "consume_inbound_delivery",
        delivery_id=delivery,
        resource="email_receives_per_day",
        day=day,
        limit=limit,
    )


def test_a_retried_inbound_delivery_is_charged_once(owner):
    first = inbound(owner, "delivery-1")
    retries = [inbound(owner, "delivery-1") for _ in range(4)]
    assert first["charged"] is True and first["count"] == 1
    assert all(r["charged"] is False and r["allowed"] and r["count"] == 1 for r in retries)
    assert inbound(owner, "delivery-2")["count"] == 2


def test_a_retry_is_still_accepted_after_the_limit_fills(owner):
    inbound(owner, "a", limit=2)
    inbound(owner, "b", limit=2)
    assert inbound(owner, "c", limit=2)["allowed"] is False
    assert inbound(owner, "a", limit=2)["allowed"] is True  # already charged: not a new receive
    assert inbound(owner, "c", limit=2)["allowed"] is False  # never claimed by a denial


def test_a_retry_on_the_next_day_is_not_charged_again(owner):
    inbound(owner, "late", day=DAY)
    assert inbound(owner, "late", day=shifted(1))["charged"] is False
    assert meter(owner, "read", resource="email_receives_per_day", day=shifted(1))["count"] == 0


# --- storage bytes ------------------------------------------------------------------------------


def test_storage_bytes_cold_start_reserve_and_limit(owner):
    assert meter(owner, "read_storage_bytes")["initialized"] is False
    assert meter(owner, "reserve_storage_bytes", amount=10, limit=100)["needs_bootstrap"] is True
    assert meter(owner, "initialize_storage_bytes")["bytes"] == 0
    assert meter(owner, "initialize_storage_bytes")["created"] is False
    assert meter(owner, "reserve_storage_bytes", amount=60, limit=100)["bytes"] == 60
    refused = meter(owner, "reserve_storage_bytes", amount=41, limit=100)
    assert (refused["allowed"], refused["bytes"]) == (False, 60)
    assert meter(owner, "reserve_storage_bytes", amount=-100, limit=100)["bytes"] == 0


def test_set_storage_bytes_is_absolute_and_can_compare_revisions(owner):
    first = meter(owner, "set_storage_bytes", value=500)
    assert (first["set"], first["bytes"]) == (True, 500)
    stale = meter(owner, "set_storage_bytes", value=1, expected_revision=first["revision"] - 1)
    assert (stale["set"], stale["bytes"]) == (False, 500)
    assert meter(owner, "set_storage_bytes", value=7, expected_revision=first["revision"])["set"]


def test_reconcile_measures_the_owners_public_rows(owner, outsider):
    McpUserServerInstructionsFactory(user_id=owner.stable_user_id, instructions="y" * 3000)
    McpUserServerInstructionsFactory(user_id=outsider.stable_user_id, instructions="z" * 9000)
    result = meter(owner, "reconcile_storage_bytes")
    assert 3000 <= result["bytes"] < 9000
    assert meter(owner, "read_storage_bytes")["bytes"] == result["bytes"]


# --- package services --------------------------------------------------------------------------


def test_package_service_liveness_counts(owner):
    meter(
        owner, "upsert_package_service_state", package_id="p1", service_name="web", status="running"
    )
    meter(
        owner,
        "upsert_package_service_state",
        package_id="p1",
        service_name="cron",
        status="running",
        mode="bounded",
    )
    meter(
        owner, "upsert_package_service_state", package_id="p2", service_name="web", status="stopped"
    )
    assert meter(owner, "count_package_service_states") == 2
    assert meter(owner, "count_package_service_states", mode="persistent") == 1
    assert (
        meter(
            owner,
            "count_package_service_states",
            exclude_package_id="p1",
            exclude_service_name="web",
        )
        == 1
    )
    assert meter(owner, "count_package_service_states", fresh_seconds=60) == 2
    revision = meter(
        owner, "upsert_package_service_state", package_id="p1", service_name="web", status="idle"
    )["revision"]
    assert revision == 2
    assert meter(owner, "delete_package_service_state", package_id="p1", service_name="cron") == {
        "deleted": 1
    }
    listed = meter(owner, "list_package_service_states")
    assert [(r["package_id"], r["service_name"], r["status"]) for r in listed] == [
        ("p1", "web", "idle"),
        ("p2", "web", "stopped"),
    ]
    seeded = meter(
        owner,
        "bootstrap_package_service_states",
        rows=[
            {"package_id": "p1", "service_name": "web"},
            {"package_id": "p3", "service_name": "api"},
        ],
    )
    assert seeded == {"inserted": 1}  # existing rows are not overwritten


# --- export, purge, version ---------------------------------------------------------------------


def test_export_pages_by_day_and_resource_with_meter_state_on_page_one(owner):
    for offset in range(3):
        for resource in ("execute_calls_per_day", "job_runs_per_day"):
            consume(owner, resource=resource, day=shifted(offset))
    meter(owner, "set_storage_bytes", value=42)
    page = meter(owner, "export_counters", limit=4)
    assert [(c["day"], c["resource"]) for c in page["counters"]] == [
        (DAY, "execute_calls_per_day"),
        (DAY, "job_runs_per_day"),
        (shifted(1), "execute_calls_per_day"),
        (shifted(1), "job_runs_per_day"),
    ]
    assert page["storage_bytes_state"]["bytes"] == 42
    assert page["deletion_state"] == {"deleting_at": None, "active_write_leases": 0}
    second = meter(owner, "export_counters", cursor=page["next_cursor"], limit=4)
    assert [(c["day"], c["resource"]) for c in second["counters"]] == [
        (shifted(2), "execute_calls_per_day"),
        (shifted(2), "job_runs_per_day"),
    ]
    assert second["next_cursor"] is None
    assert "storage_bytes_state" not in second and "deletion_state" not in second


def test_export_never_reveals_lease_tokens_or_holders(owner):
    with connection.cursor() as cursor:
        consume(owner)
        schema = schema_name_for(owner.stable_user_id)
        cursor.execute(
            f'INSERT INTO "{schema}".account_write_leases VALUES (%s, %s, now(), NULL)',
            ["secret-token", "holder-x"],
        )
    text = str(meter(owner, "export_counters"))
    assert "secret-token" not in text and "holder-x" not in text
    assert meter(owner, "export_counters")["deletion_state"]["active_write_leases"] == 1


def test_purge_clears_the_meter_but_keeps_a_deletion_tombstone(owner):
    consume(owner)
    inbound(owner, "d")
    meter(owner, "set_storage_bytes", value=9)
    schema = schema_name_for(owner.stable_user_id)
    with connection.cursor() as cursor:
        cursor.execute(f'INSERT INTO "{schema}".deletion_state VALUES (1, now())')
    result = meter(owner, "purge")
    assert result["tombstone_kept"] is True
    for table in (
        "daily_counters",
        "inbound_delivery_claims",
        "storage_bytes_state",
    ):
        assert rows(owner, table) == []
    assert meter(owner, "read_deletion_state")["deleting_at"] is not None


def test_the_meter_records_its_schema_version(owner):
    consume(owner)
    assert meter(owner, "schema_info") == {
        "schema_version": USER_METER_VERSION,
        "current": USER_METER_VERSION,
    }


def test_an_older_schema_upgrades_to_the_full_meter_and_records_the_version(owner):
    from kody.userschema.schemas import create_schema, known

    create_schema(owner.stable_user_id, version=2)
    known.forget(owner.stable_user_id)
    assert meter(owner, "read_storage_bytes")["initialized"] is False  # tables now exist
    assert meter(owner, "schema_info")["schema_version"] == USER_METER_VERSION


def test_prune_on_demand_reports_what_it_deleted(owner):
    today = timezone.now().date()
    with connection.cursor() as cursor:
        consume(owner, day=DAY)
        schema = schema_name_for(owner.stable_user_id)
        cursor.execute(
            f'INSERT INTO "{schema}".daily_counters (resource, day) VALUES (%s, %s)',
            [R, today - timedelta(days=30)],
        )
    assert meter(owner, "prune")["daily_counters"] == 1
