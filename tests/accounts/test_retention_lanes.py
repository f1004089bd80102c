"""accounts_retention: feature-flag exposure rollups go after 90 days by their day key, and
resolved or dismissed feedback a year after its last update — whoever's rows they are."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models.feedback import FeedbackStatus, PlatformFeedback
from apps.accounts.models.flags import FeatureFlagExposureRollup
from kody.lanes import registry, run_lane
from tests.accounts.factories import FeatureFlagExposureRollupFactory, PlatformFeedbackFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_flag_exposures_are_kept_90_days_by_day(owner, outsider, frozen_clock):
    today = timezone.now().date()
    old = FeatureFlagExposureRollupFactory(user_id=owner.stable_user_id, day=today - timedelta(91))
    edge = FeatureFlagExposureRollupFactory(user_id=owner.stable_user_id, day=today - timedelta(90))
    theirs = FeatureFlagExposureRollupFactory(
        user_id=outsider.stable_user_id, day=today - timedelta(200)
    )
    assert registry.get("accounts_retention").cadence == registry.Cadence.HOURLY
    run = run_lane("accounts_retention")
    assert run is not None and run.items == 2
    left = set(FeatureFlagExposureRollup.objects.values_list("pk", flat=True))
    assert left == {edge.pk} and old.pk not in left and theirs.pk not in left


def test_terminal_feedback_goes_a_year_after_its_update_open_feedback_stays(
    owner, outsider, frozen_clock
):
    year_ago = timezone.now() - timedelta(days=366)
    resolved = PlatformFeedbackFactory(
        submitter_user_id=owner.stable_user_id,
        status=FeedbackStatus.RESOLVED,
        updated_at=year_ago,
    )
    dismissed = PlatformFeedbackFactory(
        submitter_user_id=outsider.stable_user_id,
        status=FeedbackStatus.DISMISSED,
        updated_at=year_ago,
    )
    still_open = PlatformFeedbackFactory(
        submitter_user_id=owner.stable_user_id, status=FeedbackStatus.OPEN, updated_at=year_ago
    )
    recent = PlatformFeedbackFactory(
        submitter_user_id=owner.stable_user_id,
        status=FeedbackStatus.RESOLVED,
        updated_at=timezone.now() - timedelta(days=364),
    )
    run_lane("accounts_retention")
    left = set(PlatformFeedback.objects.values_list("pk", flat=True))
    assert left == {still_open.pk, recent.pk}
    assert resolved.pk not in left and dismissed.pk not in left


def test_the_lane_logs_one_retention_line(frozen_clock, caplog):
    with caplog.at_level("INFO", logger="kody.retention"):
        run_lane("accounts_retention")
    lines = [r.getMessage() for r in caplog.records if r.name == "kody.retention"]
    assert lines == [
        "retention-prune lane=accounts_retention"
        " batches=feature_flag_exposure_rollups:1,platform_feedback:1 deleted=0"
        " budget_exhausted=false"
    ]
