"""One-time links: random tokens stored only as SHA-256, consumed once under a row lock.

Also the two side effects every link flow shares: mail sent after commit, and a small hourly
budget per purpose so a form cannot be used to flood someone's inbox.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import models, transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.accounts.services import audit
from kody.errors import KodyError

logger = logging.getLogger(__name__)

MAIL_MAX_PER_HOUR = 5


class InvalidToken(KodyError):
    code = "invalid_token"
    status = 400


class TokenExpired(KodyError):
    code = "token_expired"
    status = 400


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(model: type[models.Model], user: User, ttl: timedelta, **extra: Any) -> str:
    token = secrets.token_urlsafe(32)
    model.objects.create(  # type: ignore[attr-defined]
        user=user, token_hash=token_hash(token), expires_at=timezone.now() + ttl, **extra
    )
    return token


def consume(model: type[models.Model], token: str) -> Any:
    """Delete the token's row and return it; raise when it is unknown or expired."""
    if not token or len(token) > 256:
        raise InvalidToken("This link is not valid. Request a new one.")
    manager = model.objects  # type: ignore[attr-defined]
    with transaction.atomic():
        row = manager.select_for_update().filter(token_hash=token_hash(token)).first()
        if row is None:
            raise InvalidToken("This link is not valid or was already used. Request a new one.")
        row.delete()
    if row.expires_at <= timezone.now():
        raise TokenExpired("This link has expired. Request a new one.")
    return row


def site_link(path: str) -> str:
    return f"{settings.SITE_URL.rstrip('/')}{path}"


def link(path: str, token: str) -> str:
    return f"{site_link(path)}?token={token}"


def mail_after_commit(
    to: str, subject: str, body: str, *, on_result: Callable[[Exception | None], None] | None = None
) -> None:
    def send() -> None:
        try:
            send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to], fail_silently=False)
        except Exception as exc:  # noqa: BLE001 — the state change already committed
            logger.exception("account mail not sent: %s", subject)
            if on_result:
                on_result(exc)
            return
        if on_result:
            on_result(None)

    transaction.on_commit(send, robust=True)


def within_hourly_budget(kind: str, key: str) -> bool:
    return within_budget(kind, key, limit=MAIL_MAX_PER_HOUR, window_seconds=3600)


def _budget_key(kind: str, key: str) -> str:
    # Keyed hash: no address, username or session id sits in the cache in the clear.
    return f"identity:{kind}:{audit.keyed_hash(key)}"


def within_budget(kind: str, key: str, *, limit: int, window_seconds: int) -> bool:
    """Count one attempt of ``kind`` by ``key``; False once more than ``limit`` were made in
    the window that the first of them opened. A cache outage fails open."""
    cache_key = _budget_key(kind, key)
    try:
        cache.add(cache_key, 0, timeout=window_seconds)
        return int(cache.incr(cache_key)) <= limit
    except Exception:  # noqa: BLE001 — a cache outage must not block the request
        logger.warning("rate budget unavailable for %s", kind)
        return True


def budget_spent(kind: str, key: str, *, limit: int) -> bool:
    """Whether ``key`` already used up its ``kind`` budget (failures counted with
    ``spend_budget``), without counting this attempt — the sign-in pattern: only failures
    count, and a spent budget refuses even a right answer."""
    try:
        return int(cache.get(_budget_key(kind, key)) or 0) >= limit
    except Exception:  # noqa: BLE001
        logger.warning("rate budget unavailable for %s", kind)
        return False


def spend_budget(kind: str, key: str, *, window_seconds: int) -> None:
    cache_key = _budget_key(kind, key)
    try:
        cache.add(cache_key, 0, timeout=window_seconds)
        cache.incr(cache_key)
    except Exception:  # noqa: BLE001
        logger.warning("rate budget unavailable for %s", kind)


def reset_budget(kind: str, key: str) -> None:
    try:
        cache.delete(_budget_key(kind, key))
    except Exception:  # noqa: BLE001
        logger.warning("rate budget unavailable for %s", kind)
