"""/admin/insights: operators see platform-wide counts only; everyone else is turned away."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.entitlements.models import UsageEvent, UsageRollup
from apps.entitlements.services import consume, insights, usage
from apps.entitlements.services.enforcement import LimitReached
from apps.jobs.services import insights as job_insights
from kody import insights as kernel_insights
from tests.jobs.factories import JobFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

PANELS = [
    "email_volume",
    "delivery_outcomes",
    "workflow_status",
    "activation_funnel",
    "usage_trend",
]


def test_a_metered_call_writes_one_usage_event_per_unit(owner, outsider, settings):
    settings.KODY_ACTORS_INLINE = True
    consume(owner, "execute_calls_per_day", 3, key="insights-1")
    assert not UsageEvent.objects.exists()  # buffered, not written on the metered path
    assert usage.drain_buffer() == 3
    events = UsageEvent.objects.filter(user_id=owner.stable_user_id)
    assert [e.metric for e in events] == ["execute_calls_per_day"] * 3
    assert not UsageEvent.objects.filter(user_id=outsider.stable_user_id).exists()


def test_a_refused_charge_writes_no_event(owner, settings):
    settings.KODY_ACTORS_INLINE = True
    with pytest.raises(LimitReached):
        consume(owner, "email_sends_per_day", 10_000, key="insights-2")
    usage.drain_buffer()
    assert not UsageEvent.objects.filter(user_id=owner.stable_user_id).exists()


def test_operator_sees_every_panel_in_order(frozen_clock, operator_client, owner):
    usage.record_usage(owner.stable_user_id, "email_sends_per_day")
    usage.drain_buffer()
    page = operator_client.get("/admin/insights/")
    assert page.status_code == 200
    html = page.content.decode()
    positions = [html.index(f'id="insight-{key}"') for key in PANELS]
    assert positions == sorted(positions)
    assert html.count('class="kody-chart"') == len(PANELS)


def test_the_page_carries_no_identifier_of_anyone(frozen_clock, operator_client, owner):
    for metric in ("email_sends_per_day", "email_delivery:bounced", "job_runs_per_day"):
        usage.record_usage(owner.stable_user_id, metric)
    usage.drain_buffer()
    UsageRollup.objects.create(
        user_id=owner.stable_user_id, metric="execute_calls_per_day", month="2031-03", event_count=9
    )
    JobFactory(user_id=owner.stable_user_id, last_run_at=timezone.now(), last_run_status="success")
    html = operator_client.get("/admin/insights/").content.decode()
    for secret in (owner.stable_user_id, owner.username, owner.email):
        assert secret not in html


def test_a_user_is_turned_away(owner_client):
    response = owner_client.get("/admin/insights/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_redis_outage_never_fails_the_metered_action(owner, settings, monkeypatch):
    settings.KODY_ACTORS_INLINE = True

    def down(alias):
        raise ConnectionError("redis down")

    monkeypatch.setattr(usage, "get_redis_connection", down)
    assert consume(owner, "execute_calls_per_day", key="insights-3").count == 1


def test_a_failing_panel_is_shown_unavailable_and_the_rest_renders(operator_client, monkeypatch):
    def broken(now):
        raise RuntimeError("source down")

    monkeypatch.setitem(
        kernel_insights._panels,
        "email_volume",
        kernel_insights.Panel("email_volume", "Email volume, last 28 days", 10, broken),
    )
    html = operator_client.get("/admin/insights/").content.decode()
    start = html.index('id="insight-email_volume"')
    assert "Unavailable" in html[start : html.index("</section>", start)]
    assert 'id="insight-usage_trend"' in html


def test_the_twelve_month_trend_sums_rollups_across_users(owner, outsider, frozen_clock):
    now = timezone.now()  # March 2031
    for user, n in ((owner, 4), (outsider, 6)):
        UsageRollup.objects.create(
            user_id=user.stable_user_id,
            metric="execute_calls_per_day",
            month="2031-03",
            event_count=n,
        )
    UsageRollup.objects.create(
        user_id=owner.stable_user_id,
        metric="execute_calls_per_day",
        month="2030-02",
        event_count=50,
    )  # thirteen months back: outside the trend
    chart = insights.monthly_trend(now)
    assert chart.labels[0] == "2030-04" and chart.labels[-1] == "2031-03"
    [series] = chart.series
    assert series.values[-1] == 10 and sum(series.values) == 10


def test_workflow_status_counts_recent_runs_only(owner, outsider, frozen_clock):
    now = timezone.now()
    JobFactory(user_id=owner.stable_user_id, last_run_at=now, last_run_status="success")
    JobFactory(user_id=outsider.stable_user_id, last_run_at=now, last_run_status="error")
    JobFactory(user_id=owner.stable_user_id, last_run_at=now, last_run_status="success")
    JobFactory(
        user_id=owner.stable_user_id, last_run_at=now - timedelta(days=40), last_run_status="error"
    )
    chart = job_insights.workflow_status_chart(now)
    assert dict(zip(chart.labels, chart.series[0].values, strict=True)) == {
        "error": 1,
        "success": 2,
    }


def test_the_activation_funnel_counts_each_stage(frozen_clock, owner, outsider, operator):
    now = timezone.now()
    hours = timedelta(hours=1)
    usage.record_usage(owner.stable_user_id, "execute_calls_per_day", at=now + 2 * hours)
    usage.record_usage(owner.stable_user_id, "job_runs_per_day", at=now + 3 * hours)
    usage.record_usage(outsider.stable_user_id, "execute_calls_per_day", at=now + 4 * hours)
    usage.drain_buffer()
    chart = job_insights.activation_funnel_chart(now)
    values = dict(zip(chart.labels, chart.series[0].values, strict=True))
    assert values["signed up"] == 3  # the cast, all created under the frozen clock
    assert values["verified email"] == 3
    assert values["first metered call"] == 2
    assert values["first job run"] == 1
    # Signup to first metered call: ada after 2 h, ben after 4 h.
    assert "Median time from signup to the first metered call: 3.0 h." in chart.note
