"""Retention of accounts' growing tables (seed 000 "Growth and retention policies")."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.accounts.models.feedback import TERMINAL_FEEDBACK_STATUSES, PlatformFeedback
from apps.accounts.models.flags import FeatureFlagExposureRollup
from kody.retention import prune_oldest

FLAG_EXPOSURE_DAYS = 90
TERMINAL_FEEDBACK_DAYS = 365


def prune_flag_exposures(batch: int) -> int:
    """Daily exposure rollups older than 90 days, by their day key."""
    oldest_kept = timezone.now().date() - timedelta(days=FLAG_EXPOSURE_DAYS)
    return prune_oldest(FeatureFlagExposureRollup.objects.filter(day__lt=oldest_kept), "day", batch)


def prune_feedback(batch: int) -> int:
    """Resolved or dismissed feedback a year after its last update; open rows stay."""
    cutoff = timezone.now() - timedelta(days=TERMINAL_FEEDBACK_DAYS)
    rows = PlatformFeedback.objects.filter(
        status__in=TERMINAL_FEEDBACK_STATUSES, updated_at__lt=cutoff
    )
    return prune_oldest(rows, "updated_at", batch)
