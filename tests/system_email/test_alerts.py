"""The auth_denial_alert and email_delivery_alert lanes: a burst over the baseline mails the
operators once, counts only; the next burst mails again once the first has ended."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from apps.mailbox.models import EmailDeliveryAlertEvent
from apps.system_email.models import OperatorAlert
from apps.system_email.services import alerts
from kody.lanes import registry, run_lane
from tests.accounts.factories import AuditEventFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture(autouse=True)
def operators(settings):
    settings.KODY_OPERATOR_ALERT_EMAILS = ["ops@example.org"]


def denials(n: int, at, result: str = "failure") -> None:
    for _ in range(n):
        AuditEventFactory(category="auth", action="login", result=result, timestamp=at,
                          email_hash="SENTINEL-hash", reason="bad_password")  # fmt: skip


def signals(n: int, at, prefix: str = "ev") -> None:
    EmailDeliveryAlertEvent.objects.bulk_create(
        EmailDeliveryAlertEvent(provider_event_id=f"{prefix}-{i}", provider="django",
                                event_type="bounced", occurred_at=at, owner_hash="SENTINEL-owner")
        for i in range(n)
    )  # fmt: skip


def last_hour():
    return timezone.now() - timedelta(minutes=30)


def test_both_lanes_are_hourly():
    declared = {lane.name: lane.cadence.value for lane in registry.all_lanes()}
    assert declared["auth_denial_alert"] == "hourly"
    assert declared["email_delivery_alert"] == "hourly"


def test_a_denial_burst_mails_the_operators_once(frozen_clock):
    denials(60, last_hour())
    first = run_lane("auth_denial_alert")
    assert first is not None and first.counts["mailed"] == 1 and first.items == 60
    second = run_lane("auth_denial_alert")
    assert second is not None and second.counts == {**second.counts, "burst": 1, "mailed": 0}
    [message] = mail.outbox
    assert message.to == ["ops@example.org"] and message.from_email.startswith("security@")
    assert "60 auth denials" in message.body
    assert "SENTINEL" not in message.body + message.subject


def test_a_quiet_hour_ends_the_burst_and_the_next_burst_mails_again(frozen_clock):
    denials(60, last_hour())
    run_lane("auth_denial_alert")
    frozen_clock.shift(timedelta(hours=1))  # the hour before now has no denials
    quiet = run_lane("auth_denial_alert")
    assert quiet is not None and quiet.counts["burst"] == 0
    assert OperatorAlert.objects.get(key="auth_denial").active is False
    frozen_clock.shift(timedelta(hours=1))
    denials(80, last_hour())
    again = run_lane("auth_denial_alert")
    assert again is not None and again.counts["mailed"] == 1
    assert len(mail.outbox) == 2


def test_a_busy_baseline_raises_the_bar(frozen_clock):
    start, _ = alerts.last_full_hour(timezone.now())
    for hour in range(1, 25):
        denials(30, start - timedelta(hours=hour) + timedelta(minutes=5))
    denials(60, last_hour())  # over the floor of 50, under 4 x the baseline of 30
    run = run_lane("auth_denial_alert")
    assert run is not None and run.counts["burst"] == 0 and mail.outbox == []


def test_successes_are_not_denials(frozen_clock):
    denials(80, last_hour(), result="success")
    run = run_lane("auth_denial_alert")
    assert run is not None and run.items == 0 and mail.outbox == []


def test_a_bounce_burst_mails_from_postmaster_once_and_old_signals_are_pruned(frozen_clock):
    signals(25, last_hour())
    signals(3, timezone.now() - timedelta(days=8), prefix="old")
    run = run_lane("email_delivery_alert")
    assert run is not None and run.counts["mailed"] == 1 and run.counts["pruned"] == 3
    assert run_lane("email_delivery_alert").counts["mailed"] == 0  # type: ignore[union-attr]
    [message] = mail.outbox
    assert message.from_email.startswith("postmaster@") and "25 bounces" in message.body
    assert "SENTINEL" not in message.body
    assert EmailDeliveryAlertEvent.objects.count() == 25


def test_without_a_configured_list_the_staff_are_mailed(settings, operator, owner, frozen_clock):
    settings.KODY_OPERATOR_ALERT_EMAILS = []
    signals(25, last_hour())
    run_lane("email_delivery_alert")
    [message] = mail.outbox
    assert message.to == [operator.email]


@pytest.mark.django_db(databases=["default", "audit"], transaction=True)
def test_two_concurrent_runs_mail_once(frozen_clock):
    denials(60, last_hour())
    barrier = threading.Barrier(2)
    results: list[bool] = []

    def one_run() -> None:
        from django.db import connections

        barrier.wait()
        try:
            verdict = alerts.evaluate(alerts.AUTH_DENIAL, alerts.count_auth_denials, timezone.now())
            results.append(verdict.mailed)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert len(mail.outbox) == 1
