"""Personal access tokens: issue, list, revoke, and resolve a bearer secret to its token.

Design note: only the SHA-256 of a secret is stored, and a bearer check is one unique-index
lookup on that hash. Guessing gains nothing from timing because the attacker never controls
the hash being compared. ``last_used_at`` is written with a conditional UPDATE at most once per
five minutes, so a busy agent does not turn every call into a write.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from datetime import datetime, timedelta

from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from apps.accounts import policy
from apps.accounts.models import AccessToken, TokenKind, User
from apps.accounts.services import audit
from kody.errors import InvalidInput, NotFound, RateLimited

PAT_PREFIX = "kody_pat_"
SECRET_BYTES = 32
DISPLAY_CHARS = 4
NAME_MAX = 100
MAX_BEARER_LENGTH = 512
LAST_USED_DEBOUNCE = timedelta(minutes=5)
CREATE_LIMIT = 20
CREATE_WINDOW_SECONDS = 3600


class TokenNotFound(NotFound):
    code = "token_not_found"
    message = "No such token."


def hash_secret(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create_token(
    user: User,
    name: str,
    *,
    ip: str | None = None,
    expires_at: datetime | None = None,
    enforce_rate_limit: bool = True,
) -> tuple[AccessToken, str]:
    """Issue a PAT; the plaintext is returned once and never stored."""
    name = _clean_name(name)
    policy.assert_can_mutate(user)
    if enforce_rate_limit and not _take_creation_slot(user):
        _audit(user, "token_create", "rate_limited", ip=ip)
        raise RateLimited("Too many tokens created recently; try again within the hour.")
    raw = PAT_PREFIX + secrets.token_urlsafe(SECRET_BYTES)
    token = AccessToken.objects.create(
        user=user,
        kind=TokenKind.PAT,
        name=name,
        token_prefix=raw[: len(PAT_PREFIX) + DISPLAY_CHARS],
        token_hash=hash_secret(raw),
        expires_at=expires_at,
    )
    _audit(user, "token_create", "success", ip=ip, client_id=token.principal_id)
    return token, raw


def list_tokens(user: User, *, include_revoked: bool = False) -> list[AccessToken]:
    """Both kinds: personal access tokens and the live access tokens of OAuth clients."""
    tokens = AccessToken.objects.filter(user=user)
    if not include_revoked:
        tokens = tokens.filter(revoked_at__isnull=True).exclude(
            kind=TokenKind.OAUTH, expires_at__lt=timezone.now()
        )
    return list(tokens.order_by("-created_at", "-pk"))


def revoke_token(user: User, token_id: int, *, ip: str | None = None) -> AccessToken:
    """Revoke one of the owner's tokens; someone else's id looks exactly like a missing one."""
    owned = AccessToken.objects.filter(pk=token_id, user=user)
    now = timezone.now()
    changed = owned.filter(revoked_at__isnull=True).update(revoked_at=now)
    token = owned.first()
    if token is None:
        raise TokenNotFound()
    if changed:
        _audit(user, "token_revoke", "success", ip=ip, client_id=token.principal_id)
    return token


def authenticate_bearer(raw: str | None) -> AccessToken | None:
    """The live token for a presented secret, or None (unknown, revoked, expired, unusable user)."""
    if not raw or len(raw) > MAX_BEARER_LENGTH:
        return None
    token = (
        AccessToken.objects.select_related("user")
        .filter(token_hash=hash_secret(raw), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.is_active or not policy.may_act(token.user):
        return None
    _touch(token)
    return token


def token_by_id(token_id: int) -> AccessToken | None:
    """A token authenticated moments ago, re-read: a revoke or suspension in between counts."""
    token = AccessToken.objects.select_related("user").filter(pk=token_id).first()
    if token is None or not token.is_active or not policy.may_act(token.user):
        return None
    return token


def note_mcp_use(token: AccessToken) -> None:
    """First MCP use sets the person's first-connection signals; OAuth grants track use."""
    from apps.accounts.oauth import grants

    # Only when the debounced last-use stamp was just written (a token's first use is one):
    # the common call pays nothing here.
    if not getattr(token, "just_touched", False) and token.user.first_mcp_connected_at:
        return
    _record_agent_session(token)
    if token.kind == TokenKind.OAUTH:
        grants.record_use(token)
    else:
        User.objects.filter(pk=token.user_id, first_mcp_connected_at__isnull=True).update(
            first_mcp_connected_at=timezone.now()
        )


def _record_agent_session(token: AccessToken) -> None:
    from apps.accounts.models import McpAgentSession

    now = timezone.now()
    principal = token.principal_id
    key = hashlib.sha256(f"{token.user.stable_user_id}\n{principal}".encode()).hexdigest()
    McpAgentSession.objects.update_or_create(
        do_id=key,
        defaults={"last_seen_at": now},
        create_defaults={
            "user_id": token.user.stable_user_id,
            "client_id": principal,
            "client_name": token.name[:255],
            "created_at": now,
            "last_seen_at": now,
        },
    )


class BearerBackend:
    """The object ``KODY_BEARER_BACKEND`` names (kody.callers.BearerBackend)."""

    authenticate_bearer = staticmethod(authenticate_bearer)
    token_by_id = staticmethod(token_by_id)
    note_mcp_use = staticmethod(note_mcp_use)


def _touch(token: AccessToken) -> None:
    now = timezone.now()
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_DEBOUNCE)
    if AccessToken.objects.filter(stale, pk=token.pk).update(last_used_at=now):
        token.last_used_at = now
        token.just_touched = True  # type: ignore[attr-defined]


def _clean_name(name: str) -> str:
    cleaned = " ".join((name or "").split())
    if not cleaned:
        raise InvalidInput("A token needs a name.", details={"field": "name"})
    if len(cleaned) > NAME_MAX:
        raise InvalidInput(
            f"Token names are at most {NAME_MAX} characters.", details={"field": "name"}
        )
    return cleaned


def _take_creation_slot(user: User) -> bool:
    window = int(time.time() // CREATE_WINDOW_SECONDS)
    key = f"access-token-create:{user.stable_user_id}:{window}"
    cache.add(key, 0, timeout=CREATE_WINDOW_SECONDS)
    try:
        count = cache.incr(key)
    except ValueError:  # the window expired between add and incr
        cache.set(key, 1, timeout=CREATE_WINDOW_SECONDS)
        count = 1
    return count <= CREATE_LIMIT


def _audit(
    user: User, action: str, result: str, *, ip: str | None, client_id: str | None = None
) -> None:
    audit.record(
        category="auth", action=action, result=result, email=user.email, ip=ip, client_id=client_id
    )
