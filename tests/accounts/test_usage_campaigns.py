"""The usage_entitlement_alert lane: sticky usage states, each campaign mail once (even under
two concurrent runs), the advocate mail once ever, the tips opt-out, the entitlement warning."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from apps.accounts import campaigns
from apps.accounts.models import UserTipsEmailOptOut, UserUsageCampaign
from apps.accounts.models.campaigns import UserUsageCampaignSend
from apps.entitlements.services import usage
from kody.lanes import registry, run_lane
from tests.accounts import factories as f
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def sweep() -> campaigns.Pass:
    return campaigns.sweep("", 500, lambda: False)


def state(user) -> str:
    return UserUsageCampaign.objects.get(user_id=user.stable_user_id).state


def mails_to(user) -> list[str]:
    return [m.subject for m in mail.outbox if user.email in m.to]


def test_the_lane_is_hourly():
    assert {x.name: x.cadence.value for x in registry.all_lanes()}["usage_entitlement_alert"] == (
        "hourly"
    )


def test_the_first_look_records_without_mailing_then_a_new_state_mails_once(owner, outsider):
    sweep()
    assert state(owner) == "VerifiedNoMcp" and mail.outbox == []
    assert UserUsageCampaign.objects.get(user_id=owner.stable_user_id).origin == "seed"
    owner.first_mcp_connected_at = timezone.now()
    owner.save()
    sweep()
    sweep()
    assert state(owner) == "ConnectedNoPackage"
    assert mails_to(owner) == ["Save your first package"]
    assert mails_to(outsider) == []
    assert mail.outbox[0].from_email.startswith("Kody <kody@")


def test_unverified_platform_and_suspended_accounts_are_left_alone(owner):
    unverified = f.UserFactory(username="unsure", unverified=True)
    platform = f.UserFactory(username="acme-team", account_type="platform")
    suspended = f.UserFactory(username="paused", suspended_at=timezone.now())
    sweep()
    for user in (unverified, platform, suspended):
        assert not UserUsageCampaign.objects.filter(user_id=user.stable_user_id).exists()


def test_activation_sends_the_advocate_mail_once_ever(owner):
    sweep()
    SavedPackageFactory(user_id=owner.stable_user_id, kody_id="@ada/w", source_id="s-ada")
    owner.first_mcp_connected_at = timezone.now()
    owner.second_agent_standard_gift_granted_at = timezone.now()
    owner.save()
    sweep()
    assert state(owner) == "Activated"
    assert mails_to(owner) == ["Enjoying Kody? Tell a friend"]
    row = UserUsageCampaign.objects.get(user_id=owner.stable_user_id)
    assert row.ever_activated and row.advocate_sent_at and row.first_activated_at
    # Paid, then back to Activated: still no second advocate mail.
    owner.plan = "standard"
    owner.save()
    sweep()
    assert state(owner) == "Paid"
    owner.plan = "free"
    owner.save()
    sweep()
    assert mails_to(owner) == ["Enjoying Kody? Tell a friend"]


def test_cooling_mails_once_then_stays_silent_for_good(owner, frozen_clock):
    UserUsageCampaign.objects.create(
        user_id=owner.stable_user_id,
        state="Activated",
        entered_at=timezone.now(),
        last_evaluated_at=timezone.now(),
        origin="event",
        ever_activated=True,
        advocate_sent_at=timezone.now(),
    )
    sweep()  # activated once, no package or charge in 14 days any more
    assert state(owner) == "Cooling"
    assert mails_to(owner) == ["Your Kody packages are still here"]
    owner.first_mcp_connected_at = timezone.now()
    owner.save()
    usage.record_usage(owner.stable_user_id, "execute_calls_per_day")
    usage.drain_buffer()
    sweep()
    assert state(owner) == "ConnectedNoPackage"
    assert len(mails_to(owner)) == 1  # cooling_terminal keeps the drip off
    assert UserUsageCampaign.objects.get(user_id=owner.stable_user_id).ever_activated


def test_the_tips_opt_out_silences_campaign_mail(owner):
    sweep()
    UserTipsEmailOptOut.objects.create(user_id=owner.stable_user_id)
    owner.first_mcp_connected_at = timezone.now()
    owner.save()
    sweep()
    assert state(owner) == "ConnectedNoPackage" and mails_to(owner) == []


def test_near_a_limit_the_warning_goes_out_opt_out_or_not(owner, outsider, frozen_clock):
    sweep()
    UserTipsEmailOptOut.objects.create(user_id=owner.stable_user_id)
    usage.record_usage(owner.stable_user_id, "email_sends_per_day", count=9)  # free: 10 a day
    usage.record_usage(outsider.stable_user_id, "email_sends_per_day", count=2)
    sweep()
    assert state(owner) == "LimitAware" and state(outsider) == "VerifiedNoMcp"
    [warning] = [m for m in mail.outbox if owner.email in m.to]
    assert warning.subject == "You are close to a Kody plan limit"
    assert "9 of 10 email_sends_per_day" in warning.body
    frozen_clock.shift(timedelta(days=1))  # a new day, under the limit, then over it again
    sweep()
    usage.record_usage(owner.stable_user_id, "email_sends_per_day", count=10)
    sweep()
    assert len(mails_to(owner)) == 2  # one warning per day at most


def test_the_lane_walks_everyone_and_wraps(owner, outsider, operator):
    run = run_lane("usage_entitlement_alert")
    assert run is not None and run.items == 3 and run.counts["mailed"] == 0
    assert UserUsageCampaign.objects.count() == 3


@pytest.mark.django_db(databases=["default", "audit"], transaction=True)
def test_two_concurrent_runs_send_a_campaign_mail_once(owner):
    sweep()
    owner.first_mcp_connected_at = timezone.now()
    owner.save()
    barrier = threading.Barrier(2)
    sent: list[int] = []

    def one_run() -> None:
        from django.db import connections

        barrier.wait()
        try:
            sent.append(sweep().mailed)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(sent) == [0, 1]
    assert mails_to(owner) == ["Save your first package"]
    assert UserUsageCampaignSend.objects.filter(user_id=owner.stable_user_id).count() == 1
