"""Platform feedback: the user's approve-then-submit capability and the operators' triage.

Operators see feedback rows only — never anything else of the submitter's account.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from apps.accounts.models import PlatformFeedback
from apps.accounts.models.feedback import FeedbackCategory, FeedbackStatus
from apps.accounts.services import audit, feedback
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema
from kody.errors import InvalidInput, NotFound

CATEGORY = {"type": "string", "enum": list(FeedbackCategory.values)}
STATUS = {"type": "string", "enum": list(FeedbackStatus.values)}


def _row(row: PlatformFeedback, *, admin: bool) -> dict[str, Any]:
    view = {
        "id": row.pk,
        "category": row.category,
        "summary": row.summary,
        "details": row.details,
        "status": row.status,
        "createdAt": row.created_at.isoformat(),
    }
    if admin:
        view |= {
            "submitterUserId": row.submitter_user_id,
            "submitterUsername": row.submitter_username,
            "reviewedByUserId": row.reviewed_by_user_id,
            "reviewedAt": row.reviewed_at.isoformat() if row.reviewed_at else None,
            "adminNote": row.admin_note,
            "revision": row.revision,
            "updatedAt": row.updated_at.isoformat(),
        }
    return view


@capability(
    name="metaPlatformFeedbackSubmit",
    domain="meta",
    mutates=True,
    title="Send feedback about Kody",
    description=(
        "Two steps. Call without confirmToken to get a preview and a confirmToken; show the "
        "preview to the user and, only if they approve it unchanged, call again with the same "
        "text and the confirmToken to send it. Feedback is attributed to the account."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "category": CATEGORY,
            "summary": {"type": "string", "minLength": 1, "maxLength": feedback.SUMMARY_MAX},
            "details": {"type": "string", "minLength": 1, "maxLength": feedback.DETAILS_MAX},
            "confirmToken": {"type": "string", "minLength": 1, "maxLength": 128},
        },
        "required": ["category", "summary", "details"],
        "additionalProperties": False,
    },
)
def meta_platform_feedback_submit(
    ctx: Context,
    category: str,
    summary: str,
    details: str,
    confirmToken: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    category, summary, details = feedback.clean(category, summary, details)
    if confirmToken is None:
        return {
            "status": "preview",
            "preview": {"category": category, "summary": summary, "details": details},
            "confirmToken": feedback.confirm_token(ctx.user, category, summary, details),
            "nextStep": (
                "Show this preview to the user. If they approve it, call "
                "metaPlatformFeedbackSubmit again with the same text and this confirmToken."
            ),
        }
    row = feedback.submit(ctx.user, category, summary, details, confirmToken)
    return {"status": "submitted", "feedback": _row(row, admin=False)}


@capability(
    name="adminPlatformFeedbackGet",
    domain="admin",
    role="admin",
    title="One piece of platform feedback (operator)",
    description="One feedback row with its triage state.",
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64}},
        "required": ["id"],
        "additionalProperties": False,
    },
)
def admin_platform_feedback_get(ctx: Context, id: str) -> dict[str, Any]:  # noqa: A002
    row = PlatformFeedback.objects.filter(pk=id).first()
    if row is None:
        raise NotFound("No such feedback.")
    return _row(row, admin=True)


@capability(
    name="adminPlatformFeedbackList",
    domain="admin",
    role="admin",
    title="List platform feedback (operator)",
    description="Feedback newest first, by status and/or category; pass nextCursor back.",
    input_schema={
        "type": "object",
        "properties": {
            "status": STATUS,
            "category": CATEGORY,
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "cursor": cursor_schema(200, nullable=True),
        },
        "additionalProperties": False,
    },
)
def admin_platform_feedback_list(
    ctx: Context,
    status: str | None = None,
    category: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    rows = PlatformFeedback.objects.order_by("-created_at", "-id")
    if status is not None:
        rows = rows.filter(status=status)
    if category is not None:
        rows = rows.filter(category=category)
    if cursor:
        last = PlatformFeedback.objects.filter(pk=cursor).first()
        if last is None:
            raise InvalidInput("The cursor is not one this query returned.")
        rows = rows.filter(
            Q(created_at__lt=last.created_at) | Q(created_at=last.created_at, id__lt=last.pk)
        )
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return {
        "feedback": [_row(r, admin=True) for r in page],
        "nextCursor": page[-1].pk if more else None,
    }


@capability(
    name="adminPlatformFeedbackUpdate",
    domain="admin",
    role="admin",
    mutates=True,
    title="Triage platform feedback (operator)",
    description=(
        "Move feedback open → triaged → resolved/dismissed (a closed row may be reopened to "
        "triaged) with an optional note; records the reviewer."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": 64},
            "status": STATUS,
            "note": {"type": "string", "maxLength": feedback.NOTE_MAX},
        },
        "required": ["id", "status"],
        "additionalProperties": False,
    },
)
def admin_platform_feedback_update(
    ctx: Context,
    id: str,  # noqa: A002
    status: str,
    note: str | None = None,
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPlatformFeedbackUpdate", f"status={status}")
    row = feedback.triage(id, status=status, note=note, reviewer=ctx.user)
    return _row(row, admin=True)
