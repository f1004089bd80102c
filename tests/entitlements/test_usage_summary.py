"""usage_summary (the account page's data), the usage.json twin and the table fragment."""

from __future__ import annotations

from datetime import UTC, datetime
from unittest import mock

import pytest
from django.template.loader import render_to_string

from apps.entitlements import services
from apps.entitlements.plans import RESOURCES
from kody.actors import ActorCallTimeout

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)


def rows_by_name(summary: dict) -> dict[str, dict]:
    return {row["resource"]: row for row in summary["resources"]}


def _bucket(user, storage_id: str, size: int) -> None:  # type: ignore[no-untyped-def]
    """A storage bucket's estimate for ``user`` (the inventory the usage read sums)."""
    from apps.packages.models import UserStorageBucket

    UserStorageBucket.objects.create(
        user_id=user.stable_user_id,
        storage_id=storage_id,
        kind="job",
        estimated_bytes=size,
        last_seen_at=NOON,
    )


def test_summary_has_every_limit_with_use_unit_and_reset(owner):
    services.consume(owner, "execute_calls_per_day", 7, now=NOON)
    summary = services.usage_summary(owner, now=NOON)
    assert (summary["plan"], summary["plan_label"], summary["metered"]) == ("free", "Free", True)
    rows = rows_by_name(summary)
    assert set(rows) == set(RESOURCES)
    execute = rows["execute_calls_per_day"]
    assert (execute["used"], execute["limit"], execute["unit"]) == (7, 250, "calls")
    assert execute["resets_at"] == datetime(2026, 8, 21, tzinfo=UTC)
    assert execute["percent"] == 3
    assert rows["email_sends_per_day"]["used"] == 0
    storage = rows["storage_bytes"]
    assert (storage["used"], storage["limit"], storage["resets_at"]) == (0, 16 * 1024 * 1024, None)
    assert storage["limit_display"] == "16.0\xa0MB"
    assert rows["email_message_bytes"]["used"] is None  # a per-message cap


def test_summary_counts_the_owners_rows_only(owner, outsider):
    services.consume(outsider, "job_runs_per_day", 5, now=NOON)
    assert rows_by_name(services.usage_summary(owner, now=NOON))["job_runs_per_day"]["used"] == 0


def test_the_row_counts_buckets_and_actor_state_are_one_query(owner, outsider):
    """counters.read_local: every table-backed count, the storage buckets' estimate and the
    user's actor table sets in ONE statement, each counting the owner's rows only."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.entitlements.services import counters
    from apps.jobs.actor import RunLog

    _bucket(owner, "job:a", 100)
    _bucket(owner, "job:b", 20)
    _bucket(outsider, "job:c", 5000)
    names = ["repos", "scheduled_jobs", "secrets", "saved_packages", "repo_sessions"]
    counters.read_local(owner.stable_user_id, names)  # learns which tables exist
    with CaptureQueriesContext(connection) as queries:
        local = counters.read_local(owner.stable_user_id, names)
    assert len(queries) == 1
    assert queries[0]["sql"].startswith("EXECUTE kody_")  # prepared once, never planned again
    assert local.tables == {"repos": 0, "scheduled_jobs": 0, "secrets": 0, "saved_packages": 0}
    assert local.bucket_bytes == 120
    assert not local.schema and not local.has_state("concurrent_workflows")  # no schema yet
    RunLog.call(owner.stable_user_id, "concurrent_workflows")  # creates RunLog's table set
    assert counters.read_local(owner.stable_user_id, names).has_state("concurrent_workflows")
    assert not counters.read_local("0" * 64, names).has_state("concurrent_workflows")


def test_the_prepared_read_sees_each_change_and_only_the_owners_rows(owner, outsider):
    from apps.entitlements.services import counters
    from apps.packages.models import UserStorageBucket

    names = ["scheduled_jobs"]
    for _ in range(8):  # past the runs after which Postgres keeps a generic plan
        assert counters.read_local(owner.stable_user_id, names).bucket_bytes == 0
    _bucket(owner, "job:a", 7)
    _bucket(outsider, "job:b", 500)
    assert counters.read_local(owner.stable_user_id, names).bucket_bytes == 7
    assert counters.read_local(outsider.stable_user_id, names).bucket_bytes == 500
    UserStorageBucket.objects.filter(user_id=owner.stable_user_id).delete()
    assert counters.read_local(owner.stable_user_id, names).bucket_bytes == 0


@pytest.mark.django_db(transaction=True)
def test_a_session_that_lost_its_prepared_read_prepares_it_again(owner):
    """A pooler may hand the connection another backend, or something runs DEALLOCATE: outside
    a transaction the read prepares again and answers."""
    from django.db import connection

    from apps.entitlements.services import counters

    names = ["scheduled_jobs"]
    assert counters.read_local(owner.stable_user_id, names).tables["scheduled_jobs"] == 0
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert counters.read_local(owner.stable_user_id, names).tables["scheduled_jobs"] == 0


def test_a_user_the_mailbox_never_ran_for_has_no_stored_mail_without_asking(owner, monkeypatch):
    from apps.mailbox.actor import Mailbox

    monkeypatch.setattr(Mailbox, "call", lambda *a, **k: pytest.fail("Mailbox asked"))
    rows = rows_by_name(services.usage_summary(owner, now=NOON))
    assert rows["stored_email_messages"]["used"] == 0


def test_summary_degrades_when_the_meter_does_not_answer(owner):
    timeout = ActorCallTimeout("entitlements.UserMeter", "snapshot", "x", 3)
    with mock.patch("apps.entitlements.services.metering.UserMeter.call", side_effect=timeout):
        summary = services.usage_summary(owner, now=NOON)
    assert summary["metered"] is False
    assert rows_by_name(summary)["execute_calls_per_day"]["used"] is None
    html = render_to_string("entitlements/usage_table.html", {"usage": summary})
    assert "unavailable" in html


def test_an_agents_usage_read_gets_the_meters_error_not_a_partial_answer(owner):
    timeout = ActorCallTimeout("entitlements.UserMeter", "snapshot", "x", 3)
    with mock.patch("apps.entitlements.services.metering.UserMeter.call", side_effect=timeout):
        with pytest.raises(ActorCallTimeout):
            services.usage_summary_json(owner, now=NOON)
        assert services.usage_summary(owner, now=NOON)["metered"] is False  # the page's read


def test_the_fragment_is_an_accessible_table_with_a_meter_per_measured_limit(owner):
    services.consume(owner, "email_sends_per_day", 9, now=NOON)
    summary = services.usage_summary(owner, now=NOON)
    html = render_to_string("entitlements/usage_table.html", {"usage": summary})
    assert "<caption>" in html and 'scope="col"' in html and 'scope="row"' in html
    assert '<meter min="0" max="10" value="9"' in html
    assert 'aria-label="Emails sent per day: 9 of 10"' in html
    measured = [row for row in summary["resources"] if row["used"] is not None]
    assert html.count("<meter") == len(measured) >= 12
    # Counts whose authority is another app's actor (stored mail, repo sessions, workflows)
    # show a dash until that app registers a counter.
    unmeasured = {row["resource"] for row in summary["resources"] if row["used"] is None}
    assert unmeasured <= {
        "email_message_bytes",
        "stored_email_messages",
        "repo_sessions",
        "concurrent_workflows",
    }


def test_usage_json_is_the_callers_own(client, owner, outsider):
    services.consume(outsider, "job_runs_per_day", 4)
    client.force_login(owner)
    data = client.get(f"/account/usage.json?userId={outsider.stable_user_id}").json()
    assert {r["resource"]: r["used"] for r in data["resources"]}["job_runs_per_day"] == 0
    assert data["plan"] == "free"


def test_usage_json_needs_a_login(client):
    assert client.get("/account/usage.json").status_code == 302


def test_the_account_usage_page_shows_the_table(client, owner):
    services.consume(owner, "execute_calls_per_day", 2)
    client.force_login(owner)
    response = client.get("/account/usage")
    assert response.status_code == 200
    assert b"Execute calls per day" in response.content
    assert b"<meter" in response.content
