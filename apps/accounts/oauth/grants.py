"""A person's OAuth grants: approve, remember, list, revoke, record use, purge, export.

A grant is the person-facing side of "this client may act for me" (``oauth_grants``); the
toolkit's codes and tokens hang off the same (person, application) pair. Revoking deletes every
code and token of the pair in one transaction, so a token in flight is refused from the moment
the revoke commits (``access_tokens`` rows cascade with the toolkit's).

First use (the first bearer check of a grant's token at ``/mcp``) stamps ``first_used_at`` with
a conditional UPDATE, then sets the seed's product signals (``first_mcp_connected_at``,
``mcp_client_name``) where unset, and settles the *second-agent* gift: when the person's
distinct used client ids first reach two, ``second_agent_standard_gift_granted_at`` is written
once (under the user row lock, so two clients connecting at the same moment write it once),
and ``…_expires_at`` = now + 14 days only when the overlay actually raises a free account.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from oauth2_provider.models import AccessToken as ToolkitAccessToken
from oauth2_provider.models import Application, Grant, RefreshToken

from apps.accounts import policy
from apps.accounts.models import AccessToken, OAuthGrant, TokenKind, User
from apps.accounts.services import audit
from kody.errors import NotFound

logger = logging.getLogger(__name__)

LAST_USED_DEBOUNCE = timedelta(minutes=5)
PURGE_BATCH = 500
ABANDONED_CLIENT_AGE = timedelta(days=1)
PURGE_BUDGET_SECONDS = 30.0


class GrantNotFound(NotFound):
    code = "grant_not_found"
    message = "No such connection."


def approve(
    user: User, application: Application, scopes: list[str], *, remember: bool
) -> OAuthGrant:
    now = timezone.now()
    grant, _ = OAuthGrant.objects.update_or_create(
        user=user,
        application=application,
        defaults={
            "client_id": application.client_id,
            "client_name": application.name or "",
            "scopes": sorted(set(scopes)),
            "remember": remember,
            "approved_at": now,
            "revoked_at": None,
        },
    )
    audit.record(
        category="oauth", action="grant_approve", result="success", email=user.email,
        client_id=application.client_id,
    )  # fmt: skip
    return grant


def remembered(user: User, application: Application, scopes: list[str]) -> bool:
    """True when the person asked to skip consent for this client and these scopes."""
    grant = OAuthGrant.objects.filter(
        user=user, application=application, revoked_at__isnull=True, remember=True
    ).first()
    return grant is not None and set(scopes) <= set(grant.scopes)


def list_grants(user: User) -> list[OAuthGrant]:
    return list(
        OAuthGrant.objects.filter(user=user, revoked_at__isnull=True).order_by(
            "-approved_at", "-pk"
        )
    )


def revoke_grant(user: User, grant_id: int, *, ip: str | None = None) -> OAuthGrant:
    """Revoke one of the person's grants; another person's id looks exactly like a missing one."""
    with transaction.atomic():
        grant = OAuthGrant.objects.select_for_update().filter(pk=grant_id, user=user).first()
        if grant is None:
            raise GrantNotFound()
        _drop_tokens(Q(user=user, application_id=grant.application_id))
        if grant.revoked_at is None:
            grant.revoked_at = timezone.now()
            grant.remember = False
            grant.save(update_fields=["revoked_at", "remember"])
    audit.record(
        category="oauth", action="grant_revoke", result="success", email=user.email, ip=ip,
        client_id=grant.client_id,
    )  # fmt: skip
    return grant


def revoke_all_for(user_id: int) -> int:
    """Account deletion's first step: every grant revoked and every OAuth token gone."""
    with transaction.atomic():
        _drop_tokens(Q(user_id=user_id))
        count = OAuthGrant.objects.filter(user_id=user_id, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), remember=False
        )
    return count


def _drop_tokens(owner: Q) -> None:
    families = RefreshToken.objects.filter(owner).values_list("token_family", flat=True).distinct()
    for family in list(families):
        RefreshToken.revoke_family(family)
    RefreshToken.objects.filter(owner, revoked__isnull=True).update(revoked=timezone.now())
    ToolkitAccessToken.objects.filter(owner).delete()  # cascades to access_tokens rows
    Grant.objects.filter(owner).delete()


# --- use ---------------------------------------------------------------------------------


def record_use(token: AccessToken) -> bool:
    """Called on an accepted OAuth bearer at ``/mcp``: last use (debounced), first use once.
    True when this call wrote the second-agent gift."""
    if token.kind != TokenKind.OAUTH or not token.client_id:
        return False
    now = timezone.now()
    pair = OAuthGrant.objects.filter(user_id=token.user_id, client_id=token.client_id)
    first = pair.filter(first_used_at__isnull=True).update(first_used_at=now, last_used_at=now)
    if not first:
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_DEBOUNCE)
        pair.filter(stale).update(last_used_at=now)
        return False
    client_name = pair.values_list("client_name", flat=True).first() or token.name
    User.objects.filter(pk=token.user_id, first_mcp_connected_at__isnull=True).update(
        first_mcp_connected_at=now
    )
    User.objects.filter(pk=token.user_id, mcp_client_name__isnull=True).update(
        mcp_client_name=client_name[:255]
    )
    # The second-agent gift is a plan grant: entitlements, an app built on this one, settles it
    # (registered with the policy when it loads).
    return policy.first_mcp_client_use(token.user_id, now)


# --- purge and export ----------------------------------------------------------------------


def purge_expired(
    *, batch: int = PURGE_BATCH, out_of_time: Callable[[], bool] | None = None
) -> dict[str, int]:
    """Expired codes, expired access tokens, dead refresh tokens and clients nobody approved
    within a day, in bounded batches (the
    ``oauth_purge_expired`` lane); stops between batches once ``out_of_time()`` says so."""
    from oauth2_provider.models import refresh_token_expire_timedelta

    started = time.monotonic()
    if out_of_time is None:

        def out_of_time() -> bool:
            return time.monotonic() - started >= PURGE_BUDGET_SECONDS

    now = timezone.now()
    counts = {"codes": 0, "access_tokens": 0, "refresh_tokens": 0, "abandoned_clients": 0}
    window = timedelta(seconds=_reuse_window_seconds())
    expire_delta = refresh_token_expire_timedelta()
    dead_refresh = Q(revoked__lt=now - window)
    if expire_delta:
        dead_refresh |= Q(
            access_token__isnull=True, revoked__isnull=True, created__lt=now - expire_delta
        )
    steps: list[tuple[str, Any, Q]] = [
        ("codes", Grant, Q(expires__lt=now)),
        ("refresh_tokens", RefreshToken, dead_refresh),
        # An expired access token still paired with a live refresh token stays: the refresh
        # token's own lifetime is measured from it.
        ("access_tokens", ToolkitAccessToken, Q(expires__lt=now, refresh_token__isnull=True)),
        # Registered (or fetched) a day ago and never approved by anyone: open registration
        # must not grow the table forever.
        (
            "abandoned_clients",
            Application,
            Q(
                registration_source__in=["dcr", "cimd"],
                created__lt=now - ABANDONED_CLIENT_AGE,
                kody_grants__isnull=True,
            ),
        ),
    ]
    for name, model, condition in steps:
        while not out_of_time():
            ids = list(
                model.objects.filter(condition).order_by("pk").values_list("pk", flat=True)[:batch]
            )
            if not ids:
                break
            model.objects.filter(pk__in=ids).delete()
            counts[name] += len(ids)
            if len(ids) < batch:
                break
    return counts


def _reuse_window_seconds() -> int:
    from django.conf import settings

    return int(settings.KODY_OAUTH_REFRESH_REUSE_SECONDS)


def export_rows(user_id: int, *, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
    """One keyset page of the ``oauth_grants`` export section: client, scopes, times — never
    a token."""
    grants = OAuthGrant.objects.filter(user_id=user_id, pk__gt=after).order_by("pk")[:limit]
    return [
        {
            "id": grant.pk,
            "clientId": grant.client_id,
            "clientName": grant.client_name,
            "scopes": list(grant.scopes),
            "remember": grant.remember,
            "createdAt": _iso(grant.created_at),
            "approvedAt": _iso(grant.approved_at),
            "firstUsedAt": _iso(grant.first_used_at),
            "lastUsedAt": _iso(grant.last_used_at),
            "revokedAt": _iso(grant.revoked_at),
        }
        for grant in grants
    ]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
