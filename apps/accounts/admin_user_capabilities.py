"""Operator capabilities over accounts: create, read, list, update (plan included), the
stable-id conflict probe, and the audit-log query.

Projections are content-free: identity and state columns only, never a password hash, token,
profile text or mail. Writes are audit-first (``audit.record_intent`` before the change).
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import AuditEvent, Plan, User
from apps.accounts.models.users import stable_user_id_for
from apps.accounts.services import audit, identity
from apps.accounts.services.lookup import account_by_stable_id
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema
from kody.errors import InvalidInput

USER_ID = {"type": "string", "minLength": 1, "maxLength": 64}
PLAN = {"type": "string", "enum": list(Plan.values)}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 200}
CURSOR = cursor_schema(512, nullable=True)


def user_view(user: User) -> dict[str, Any]:
    return {
        "userId": user.stable_user_id,
        "username": user.username,
        "email": user.email,
        "emailVerified": user.email_verified_at is not None,
        "plan": user.plan,
        "accountType": user.account_type,
        "role": "admin" if user.is_staff else "user",
        "suspended": user.suspended_at is not None,
        "deleting": user.deleting_at is not None,
        "createdAt": user.created_at.isoformat(),
    }


def _encode(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


def _decode(cursor: str, size: int) -> list[Any]:
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError):
        values = None
    if not isinstance(values, list) or len(values) != size:
        raise InvalidInput(
            "The cursor is not one this query returned.", details={"field": "cursor"}
        )
    return values


@capability(
    name="adminUserCreate",
    domain="admin",
    role="admin",
    mutates=True,
    title="Create an account (operator)",
    description=(
        "Create a verified person account; without a password the reply carries a one-time "
        "set-password link to hand over. Operators are made with manage.py, never here."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "email": {"type": "string", "minLength": 3, "maxLength": 320},
            "username": {"type": "string", "minLength": 1, "maxLength": 64},
            "password": {
                "type": "string",
                # What Django's validators enforce that a schema can say: at least eight
                # characters, not all digits. Common passwords and ones close to the
                # username or email are refused too (422), which no schema can list.
                "minLength": 8,
                "maxLength": 1024,
                "pattern": "[^0-9]",
                "description": "At least 8 characters, not all digits, not a common password, "
                "not close to the username or email.",
            },
            "plan": PLAN,
        },
        "required": ["email", "username"],
        "additionalProperties": False,
    },
)
def admin_user_create(
    ctx: Context,
    email: str,
    username: str,
    password: str | None = None,
    plan: str = Plan.FREE,
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminUserCreate", f"plan={plan}")
    with transaction.atomic():
        user = identity.provision(email=email, username=username, password=password)
        if plan != user.plan:
            user.plan = plan
            user.save(update_fields=["plan", "updated_at"])
        link = None if password is not None else identity.set_password_link(user)
    return {"user": user_view(user), "setPasswordLink": link}


@capability(
    name="adminUserGet",
    domain="admin",
    role="admin",
    title="One account (operator)",
    description="One account's identity, plan and state by stable user id.",
    input_schema={
        "type": "object",
        "properties": {"userId": USER_ID},
        "required": ["userId"],
        "additionalProperties": False,
    },
)
def admin_user_get(ctx: Context, userId: str) -> dict[str, Any]:  # noqa: N803
    return user_view(account_by_stable_id(userId))


@capability(
    name="adminUserList",
    domain="admin",
    role="admin",
    title="List accounts (operator)",
    description=(
        "Accounts newest first, optionally by plan or a username/email prefix; pass nextCursor "
        "back until it is null."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 320},
            "plan": PLAN,
            "limit": LIMIT,
            "cursor": CURSOR,
        },
        "additionalProperties": False,
    },
)
def admin_user_list(
    ctx: Context,
    query: str | None = None,
    plan: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    rows = User.objects.order_by("-id")
    if plan is not None:
        rows = rows.filter(plan=plan)
    if query is not None:
        q = query.strip().lower()
        rows = rows.filter(Q(username__startswith=q) | Q(email__startswith=q))
    if cursor:
        (last_id,) = _decode(cursor, 1)
        if not isinstance(last_id, int):
            raise InvalidInput("The cursor is not one this query returned.")
        rows = rows.filter(id__lt=last_id)
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return {
        "users": [user_view(u) for u in page],
        "nextCursor": _encode([page[-1].pk]) if more else None,
    }


@capability(
    name="adminUserUpdate",
    domain="admin",
    role="admin",
    mutates=True,
    title="Change an account's plan or suspension (operator)",
    description=(
        "Set the plan (free, standard, pro, max) and/or suspend or unsuspend one account. "
        "A suspended account cannot sign in or act."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "userId": USER_ID,
            "plan": PLAN,
            "suspended": {"type": "boolean"},
        },
        "required": ["userId"],
        "additionalProperties": False,
    },
)
def admin_user_update(
    ctx: Context,
    userId: str,  # noqa: N803
    plan: str | None = None,
    suspended: bool | None = None,
) -> dict[str, Any]:
    target = account_by_stable_id(userId)
    if plan is None and suspended is None:
        raise InvalidInput("Nothing to change: pass plan and/or suspended.")
    audit.record_intent(ctx, "adminUserUpdate", f"plan={plan} suspended={suspended}")
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=target.pk)
        if plan is not None:
            user.plan = plan
        if suspended is not None:
            user.suspended_at = (user.suspended_at or timezone.now()) if suspended else None
        # save() (not update()) so the plan cache hears about it (entitlements signals).
        user.save(update_fields=["plan", "suspended_at", "updated_at"])
    return user_view(user)


@capability(
    name="adminUserStableIdConflict",
    domain="admin",
    role="admin",
    title="Who holds an address's implicit stable id (operator)",
    description=(
        "The account whose stable user id equals the SHA-256 of this normalized email, if any: "
        "id, username, created_at and verified state only."
    ),
    input_schema={
        "type": "object",
        "properties": {"email": {"type": "string", "minLength": 3, "maxLength": 320}},
        "required": ["email"],
        "additionalProperties": False,
    },
)
def admin_user_stable_id_conflict(ctx: Context, email: str) -> dict[str, Any]:
    implicit = stable_user_id_for(email)
    holder = User.objects.filter(stable_user_id=implicit).first()
    return {
        "stableUserId": implicit,
        "holder": (
            {
                "id": holder.stable_user_id,
                "username": holder.username,
                "createdAt": holder.created_at.isoformat(),
                "emailVerified": holder.email_verified_at is not None,
            }
            if holder is not None
            else None
        ),
    }


@capability(
    name="adminAuditLogQuery",
    domain="admin",
    role="admin",
    title="Query the audit log (operator)",
    description=(
        "Audit rows newest first, filtered by category, action, result, email (matched by its "
        "keyed hash) and a time window; pass nextCursor back until it is null."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": ["account", "admin", "auth", "oauth"]},
            "action": {"type": "string", "minLength": 1, "maxLength": 128},
            "result": {"type": "string", "enum": ["success", "failure", "rate_limited"]},
            "email": {"type": "string", "minLength": 3, "maxLength": 320},
            "since": {"type": "string", "format": "date-time", "maxLength": 64},
            "until": {"type": "string", "format": "date-time", "maxLength": 64},
            "limit": LIMIT,
            "cursor": CURSOR,
        },
        "additionalProperties": False,
    },
)
def admin_audit_log_query(
    ctx: Context,
    category: str | None = None,
    action: str | None = None,
    result: str | None = None,
    email: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    rows = AuditEvent.objects.order_by("-timestamp", "-id")
    for field, value in (("category", category), ("action", action), ("result", result)):
        if value is not None:
            rows = rows.filter(**{field: value})
    if email is not None:
        rows = rows.filter(email_hash=audit.email_hash(email))
    if since is not None:
        rows = rows.filter(timestamp__gte=_instant(since, "since"))
    if until is not None:
        rows = rows.filter(timestamp__lt=_instant(until, "until"))
    if cursor:
        stamp, last_id = _decode(cursor, 2)
        if not isinstance(last_id, int) or not isinstance(stamp, str):
            raise InvalidInput("The cursor is not one this query returned.")
        at = _instant(stamp, "cursor")
        rows = rows.filter(Q(timestamp__lt=at) | Q(timestamp=at, id__lt=last_id))
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return {
        "events": [
            {
                "id": e.pk,
                "timestamp": e.timestamp.isoformat(),
                "category": e.category,
                "action": e.action,
                "result": e.result,
                "path": e.path,
                "reason": e.reason,
                "clientId": e.client_id,
            }
            for e in page
        ],
        "nextCursor": (_encode([page[-1].timestamp.isoformat(), page[-1].pk]) if more else None),
    }


def _instant(text: str, field: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{field} is not an ISO-8601 instant.", details={"field": field}
        ) from None
    if value.tzinfo is None:
        raise InvalidInput(f"{field} needs a UTC offset.", details={"field": field})
    return value
