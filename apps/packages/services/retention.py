"""Retention of the packages domain's usage trail (seed 000 "Growth and retention policies")."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.packages.models import AgentPackageConversationUse
from kody.retention import prune_oldest

CONVERSATION_USE_DAYS = 180


def prune_conversation_uses(batch: int) -> int:
    """Which conversations used a package: kept 180 days after the last use."""
    cutoff = timezone.now() - timedelta(days=CONVERSATION_USE_DAYS)
    rows = AgentPackageConversationUse.objects.filter(last_used_at__lt=cutoff)
    return prune_oldest(rows, "last_used_at", batch)
