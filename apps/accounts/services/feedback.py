"""Platform feedback: the submitter approves the exact text before it is stored, and operators
triage it open → triaged → resolved/dismissed.

The approval step is stateless: a preview returns ``confirmToken``, an HMAC over the
submitter's stable id and the exact category, summary and details; submitting the same text
with that token stores it. The row id derives from the token, so a confirm repeated by a
retrying agent stores one row, not two.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import PlatformFeedback
from apps.accounts.models.feedback import FeedbackCategory, FeedbackStatus
from kody.errors import Conflict, InvalidInput, NotFound

SUMMARY_MAX = 200
DETAILS_MAX = 8000
NOTE_MAX = 2000
# Triage moves forward; a terminal row may be reopened to triaged if it was closed by mistake.
TRANSITIONS = {
    FeedbackStatus.OPEN: {
        FeedbackStatus.TRIAGED,
        FeedbackStatus.RESOLVED,
        FeedbackStatus.DISMISSED,
    },
    FeedbackStatus.TRIAGED: {FeedbackStatus.RESOLVED, FeedbackStatus.DISMISSED},
    FeedbackStatus.RESOLVED: {FeedbackStatus.TRIAGED},
    FeedbackStatus.DISMISSED: {FeedbackStatus.TRIAGED},
}


def clean(category: str, summary: str, details: str) -> tuple[str, str, str]:
    summary = summary.strip()
    details = details.strip()
    if category not in FeedbackCategory.values:
        raise InvalidInput("Unknown category.", details={"field": "category"})
    if not 1 <= len(summary) <= SUMMARY_MAX:
        raise InvalidInput("summary is 1–200 characters.", details={"field": "summary"})
    if not 1 <= len(details) <= DETAILS_MAX:
        raise InvalidInput("details is 1–8000 characters.", details={"field": "details"})
    return category, summary, details


def confirm_token(user: Any, category: str, summary: str, details: str) -> str:
    message = "\0".join(("feedback:v1", user.stable_user_id, category, summary, details))
    return hmac.new(settings.SECRET_KEY.encode(), message.encode(), hashlib.sha256).hexdigest()


def submit(user: Any, category: str, summary: str, details: str, token: str) -> PlatformFeedback:
    category, summary, details = clean(category, summary, details)
    expected = confirm_token(user, category, summary, details)
    # Bytes: compare_digest refuses str with non-ASCII characters, and the token is input.
    if not hmac.compare_digest(expected.encode(), str(token).encode()):
        raise Conflict(
            "The confirmation does not match this text: preview it again and confirm that.",
            code="feedback_not_confirmed",
        )
    row_id = "fb_" + expected[:32]
    existing = PlatformFeedback.objects.filter(pk=row_id).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return PlatformFeedback.objects.create(
                id=row_id,
                submitter_user_id=user.stable_user_id,
                category=category,
                summary=summary,
                details=details,
                submitter_username=user.username,
                submitter_email=user.email,
            )
    except IntegrityError:
        return PlatformFeedback.objects.get(pk=row_id)  # a concurrent confirm stored it first


def triage(row_id: str, *, status: str, note: str | None, reviewer: Any) -> PlatformFeedback:
    if note is not None and len(note) > NOTE_MAX:
        raise InvalidInput("note is at most 2000 characters.", details={"field": "note"})
    with transaction.atomic():
        row = PlatformFeedback.objects.select_for_update().filter(pk=row_id).first()
        if row is None:
            raise NotFound("No such feedback.")
        if status != row.status:
            if status not in TRANSITIONS.get(FeedbackStatus(row.status), set()):
                raise Conflict(
                    f"Feedback cannot move from {row.status} to {status}.",
                    code="invalid_transition",
                )
            row.status = status
        if note is not None:
            row.admin_note = note
        row.reviewed_by_user_id = reviewer.stable_user_id
        row.reviewed_at = timezone.now()
        row.revision += 1
        row.updated_at = timezone.now()
        row.save()
    return row
