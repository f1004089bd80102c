"""Mail leaves content-free usage events: a charged send, a received message, and each
provider outcome; the insights charts count them per day and never see an address or body."""

from __future__ import annotations

import pytest

from apps.entitlements.models import UsageEvent
from apps.entitlements.services import insights, usage
from apps.mailbox.services import inbound, outbound
from tests.mailbox.conftest import address, simple_mail

pytestmark = pytest.mark.django_db


def _metrics(user) -> list[str]:
    usage.drain_buffer()
    return sorted(
        UsageEvent.objects.filter(user_id=user.stable_user_id).values_list("metric", flat=True)
    )


def test_a_send_a_receive_and_an_outcome_each_leave_one_event(owner, outsider, frozen_clock):
    sent = outbound.send(owner, to=["bob@example.org"], subject="SENTINEL", text="SENTINEL body")
    assert inbound.deliver(simple_mail("SENTINEL in"), address(owner), "u-1").status == "received"
    assert outbound.record_provider_event("django", sent["providerMessageId"], "bounced", "ev-1")

    assert _metrics(owner) == [
        "email_delivery:bounced",
        "email_receives_per_day",
        "email_sends_per_day",
    ]
    assert _metrics(outsider) == []


def test_a_duplicate_delivery_leaves_no_second_event(owner):
    for _ in range(2):
        inbound.deliver(simple_mail("twice"), address(owner), "u-dup")
    assert _metrics(owner) == ["email_receives_per_day"]


def test_the_volume_chart_counts_per_day_across_users(owner, outsider, frozen_clock):
    for user in (owner, outsider):
        outbound.send(user, to=["bob@example.org"], subject="SENTINEL", text="SENTINEL body")
    inbound.deliver(simple_mail("in"), address(owner), "u-2")
    usage.drain_buffer()

    from django.utils import timezone

    chart = insights.daily_chart(
        {"email_sends_per_day": "sent", "email_receives_per_day": "received"}, timezone.now()
    )
    assert len(chart.labels) == 28
    assert [s.name for s in chart.series] == ["sent", "received"]
    assert (chart.series[0].values[-1], chart.series[1].values[-1]) == (2, 1)
    assert sum(chart.series[0].values[:-1]) == 0  # zero-filled before today
