"""Short-lived repo tokens for git remotes: one repo, read or write, hashed at rest.

Minting a write token marks the source as possibly pushed to: ``external_check_until`` becomes
the token's expiry plus an hour, so the reconcile lane looks at it until then (seed 000).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.db.models import Q
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from apps.packages.models import EntitySource, RepoToken
from apps.packages.models.gitstore import RepoTokenAccess

TOKEN_TTL = timedelta(hours=1)
CHECK_GRACE = timedelta(hours=1)
PREFIX = "kgr_"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def mint(source: EntitySource, access: str, *, ttl: timedelta = TOKEN_TTL) -> tuple[RepoToken, str]:
    if access not in RepoTokenAccess.values:
        raise ValueError(f"unknown repo token access {access!r}")
    raw = PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + ttl
    token = RepoToken.objects.create(
        user_id=source.user_id,
        source_id=source.id,
        access=access,
        token_hash=hash_token(raw),
        expires_at=expires_at,
    )
    if access == RepoTokenAccess.WRITE:
        horizon = expires_at + CHECK_GRACE
        EntitySource.objects.filter(id=source.id).update(
            external_check_until=Greatest(Coalesce("external_check_until", horizon), horizon)
        )
    return token, raw


def authenticate(raw: str | None) -> RepoToken | None:
    """The live token for ``raw``, or None (unknown, revoked or expired)."""
    if not raw or not raw.startswith(PREFIX) or len(raw) > 200:
        return None
    return RepoToken.objects.filter(
        token_hash=hash_token(raw), revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).first()


def revoke_expired(limit: int = 1000) -> int:
    """Drop token rows that can no longer authenticate (expired or revoked)."""
    now = timezone.now()
    doomed = list(
        RepoToken.objects.filter(Q(expires_at__lte=now) | Q(revoked_at__isnull=False))
        .order_by("expires_at")
        .values_list("id", flat=True)[:limit]
    )
    deleted, _ = RepoToken.objects.filter(id__in=doomed).delete()
    return deleted
