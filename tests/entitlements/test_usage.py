"""Usage events, the hourly monthly rollup, and their retention windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.entitlements.models import UsageEvent, UsageRollup
from apps.entitlements.services import usage
from tests.entitlements.factories import UsageRollupFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)


def test_rollup_aggregates_a_month_per_user_and_metric(owner, outsider):
    for ms in (10, 20, 30):
        usage.record_usage(owner.stable_user_id, "execute", duration_ms=ms, cpu_ms=1, at=NOW)
    usage.record_usage(owner.stable_user_id, "execute", error=True, at=NOW)
    usage.record_usage(outsider.stable_user_id, "execute", size_bytes=7, at=NOW)
    usage.record_usage(owner.stable_user_id, "execute", at=NOW - timedelta(days=40))  # July

    usage.roll_up_usage(NOW)

    mine = UsageRollup.objects.get(user_id=owner.stable_user_id, metric="execute", month="2026-08")
    assert (mine.event_count, mine.error_count, mine.total_duration_ms, mine.total_cpu_ms) == (
        4,
        1,
        60,
        3,
    )
    theirs = UsageRollup.objects.get(user_id=outsider.stable_user_id, month="2026-08")
    assert (theirs.event_count, theirs.total_bytes) == (1, 7)
    assert not UsageRollup.objects.filter(month="2026-07").exists()  # outside the grace window


def test_rollup_is_idempotent_and_catches_up(owner):
    usage.record_usage(owner.stable_user_id, "fetch", at=NOW)
    usage.roll_up_usage(NOW)
    usage.roll_up_usage(NOW)
    usage.record_usage(owner.stable_user_id, "fetch", at=NOW + timedelta(minutes=5))
    usage.roll_up_usage(NOW + timedelta(hours=1))
    assert UsageRollup.objects.get(user_id=owner.stable_user_id).event_count == 2


def test_first_day_of_a_month_also_settles_the_previous_month(owner):
    first = datetime(2026, 9, 1, 0, 30, tzinfo=UTC)
    usage.record_usage(owner.stable_user_id, "execute", at=first - timedelta(minutes=45))
    usage.record_usage(owner.stable_user_id, "execute", at=first)
    usage.roll_up_usage(first)
    months = dict(UsageRollup.objects.values_list("month", "event_count"))
    assert months == {"2026-08": 1, "2026-09": 1}


def test_december_rolls_into_january():
    assert usage._next_month(datetime(2026, 12, 1, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    assert usage.oldest_kept_month(datetime(2026, 8, 20, tzinfo=UTC)) == "2024-09"


def test_rollups_keep_24_months(owner):
    for month in ("2024-08", "2024-09", "2026-08"):
        UsageRollupFactory(user_id=owner.stable_user_id, metric="m", month=month)
    assert usage.prune_rollups(NOW) == 1
    assert sorted(UsageRollup.objects.values_list("month", flat=True)) == ["2024-09", "2026-08"]


def test_usage_events_keep_90_days(owner):
    usage.record_usage(owner.stable_user_id, "m", at=NOW - timedelta(days=91))
    usage.record_usage(owner.stable_user_id, "m", at=NOW - timedelta(days=89))
    assert usage.drain_buffer() == 2
    assert usage.prune_usage_events(NOW) == 1
    assert UsageEvent.objects.count() == 1


def test_monthly_usage_is_owner_scoped(owner, outsider):
    usage.record_usage(owner.stable_user_id, "execute", at=NOW)
    usage.record_usage(outsider.stable_user_id, "execute", at=NOW)
    usage.roll_up_usage(NOW)
    assert {r.user_id for r in usage.monthly_usage(owner.stable_user_id)} == {owner.stable_user_id}
