"""Security audit trail: one row per auth/account/admin/oauth event in the ``audit`` database.

Design note: rows identify people only by keyed hashes (HMAC-SHA256 under SECRET_KEY) of the
normalized email and of the client IP, so the trail can answer "what happened to this address"
without storing the address. Never pass message content, tokens or passwords in ``reason``.
Recording is best-effort: an unavailable audit database is logged and skipped rather than
failing the user's request (the original treated AUDIT_DB the same way).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

logger = logging.getLogger(__name__)

CATEGORIES = frozenset({"account", "admin", "auth", "oauth"})
RESULTS = frozenset({"success", "failure", "rate_limited"})
RETENTION_DAYS = 180
REASON_MAX = 200
_EMAIL_RE = re.compile(r"[^\s@<>\"']+@[^\s@<>\"']+")


def keyed_hash(value: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), value.encode(), hashlib.sha256).hexdigest()


def email_hash(email: str) -> str:
    return keyed_hash("email:" + email.strip().lower())


def ip_hash(ip: str) -> str:
    return keyed_hash("ip:" + ip.strip())


def clean_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return _EMAIL_RE.sub("[email]", reason)[:REASON_MAX]


def record(
    *,
    category: str,
    action: str,
    result: str,
    email: str | None = None,
    ip: str | None = None,
    client_id: str | None = None,
    path: str | None = None,
    reason: str | None = None,
) -> None:
    if category not in CATEGORIES:
        raise ValueError(f"unknown audit category {category!r}")
    if result not in RESULTS:
        raise ValueError(f"unknown audit result {result!r}")
    from apps.accounts.models import AuditEvent

    try:
        AuditEvent.objects.create(
            category=category,
            action=action[:100],
            result=result,
            email_hash=email_hash(email) if email else None,
            ip_hash=ip_hash(ip) if ip else None,
            client_id=client_id,
            path=path[:500] if path else None,
            reason=clean_reason(reason),
            timestamp=timezone.now(),
        )
    except DatabaseError:
        logger.exception("audit write skipped category=%s action=%s", category, action)


def record_first(
    *,
    action: str,
    email: str | None,
    ip: str | None,
    client_id: str | None,
    surface: str,
    reason: str | None = None,
) -> None:
    """Audit-first for operator writes: the intent row is written before the change, and a
    failure to write it refuses the change (unlike ``record``, which is best-effort)."""
    from apps.accounts.models import AuditEvent

    AuditEvent.objects.create(
        category="admin",
        action=f"{action}:intent"[:100],
        result="success",
        email_hash=email_hash(email) if email else None,
        ip_hash=ip_hash(ip) if ip else None,
        client_id=client_id,
        path=f"{surface}:{action}"[:500],
        reason=clean_reason(reason),
        timestamp=timezone.now(),
    )


def record_intent(ctx: Any, action: str, reason: str | None = None) -> None:
    """``record_first`` for an operator capability's call context."""
    record_first(
        action=action,
        email=ctx.user.email,
        ip=ctx.ip,
        client_id=ctx.client_id,
        surface=ctx.surface,
        reason=reason,
    )


def prune_expired(limit: int) -> int:
    """Delete up to ``limit`` of the oldest rows past the retention window; returns how many."""
    from apps.accounts.models import AuditEvent

    cutoff = timezone.now() - timedelta(days=RETENTION_DAYS)
    doomed = AuditEvent.objects.filter(timestamp__lt=cutoff).order_by("timestamp")
    ids = list(doomed.values_list("pk", flat=True)[:limit])
    if not ids:
        return 0
    deleted, _ = AuditEvent.objects.filter(pk__in=ids).delete()
    return deleted
