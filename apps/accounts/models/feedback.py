"""User-approved platform feedback with its admin triage state.

The row stays the submitter's (deleted and exported with their account); the reviewer columns
are cleared when the reviewing admin's account is deleted and redacted from exports.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual, Range
from django.utils import timezone

from kody.fields import stable_user_id, text_id


class FeedbackCategory(models.TextChoices):
    FRICTION = "friction"
    BUG = "bug"
    EXPERIENCE = "experience"
    SUGGESTION = "suggestion"
    OTHER = "other"


class FeedbackStatus(models.TextChoices):
    OPEN = "open"
    TRIAGED = "triaged"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


TERMINAL_FEEDBACK_STATUSES = (FeedbackStatus.RESOLVED, FeedbackStatus.DISMISSED)


class PlatformFeedback(models.Model):
    id = text_id()
    submitter_user_id = stable_user_id()
    category = models.CharField(max_length=16, choices=FeedbackCategory.choices)
    summary = models.TextField(max_length=200)
    details = models.TextField(max_length=8000)
    status = models.CharField(
        max_length=16, choices=FeedbackStatus.choices, default=FeedbackStatus.OPEN
    )
    reviewed_by_user_id = stable_user_id(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    admin_note = models.TextField(max_length=2000, null=True, blank=True)
    revision = models.IntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    submitter_username = models.CharField(max_length=64)
    submitter_email = models.EmailField(max_length=320)

    class Meta:
        db_table = "platform_feedback"
        verbose_name_plural = "platform feedback"
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="platform_feedback_created_ix"),
            models.Index(
                fields=["status", "-created_at", "-id"], name="platform_feedback_status_ix"
            ),
            models.Index(
                fields=["category", "-created_at", "-id"], name="platform_feedback_category_ix"
            ),
            models.Index(fields=["reviewed_by_user_id"], name="platform_feedback_reviewer_ix"),
            models.Index(
                fields=["submitter_user_id", "status"], name="platform_feedback_sub_stat_ix"
            ),
            models.Index(
                fields=["submitter_user_id", "created_at"], name="platform_feedback_sub_time_ix"
            ),
            # Retention prunes resolved/dismissed rows 365 days after updated_at.
            models.Index(
                fields=["updated_at", "id"],
                condition=Q(status__in=TERMINAL_FEEDBACK_STATUSES),
                name="platform_feedback_terminal_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(category__in=FeedbackCategory.values), name="platform_feedback_category"
            ),
            models.CheckConstraint(
                condition=Q(status__in=FeedbackStatus.values), name="platform_feedback_status"
            ),
            models.CheckConstraint(
                condition=Range(Length("summary"), (1, 200)), name="platform_feedback_summary_len"
            ),
            models.CheckConstraint(
                condition=Range(Length("details"), (1, 8000)), name="platform_feedback_details_len"
            ),
            models.CheckConstraint(
                condition=Q(admin_note__isnull=True)
                | Q(LessThanOrEqual(Length("admin_note"), 2000)),
                name="platform_feedback_admin_note_len",
            ),
        ]

    def __str__(self) -> str:
        return self.summary
