"""The authorization-code flow and token refresh, on Authlib's client.

Start (``begin``): a PKCE verifier when the app's flow asks for one, and a ``state`` that is
Django-signed over the caller's user id and a random nonce (so it is bound to that person and
expires after ``STATE_TTL_SECONDS``). The verifier and the integration name wait in the cache
under the nonce. The callback (``complete``) accepts the state only for the signed-in user it
names, and only once: the cache entry is deleted before the code is exchanged, and a second
delivery of the same state finds nothing.

Refresh (``refresh``) runs under ``SELECT … FOR UPDATE`` on the integration row, so concurrent
callers queue; each notes the sealed refresh token before it waits, and a caller that finds
it re-sealed (someone refreshed while it waited) — or a token refreshed in the last
``FRESH_SECONDS`` — returns the stored token instead of spending the refresh token again.
Providers that rotate refresh tokens invalidate a used one, so spending it twice would break
the connection.
"""

from __future__ import annotations

import logging
import secrets as pysecrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.oauth2.rfc6749.errors import OAuth2Error
from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import User
from apps.packages.models import UserIntegration
from apps.packages.services.integrations import connections, tokens
from apps.packages.services.integrations.client import OAuthApp, session_for
from kody.errors import Conflict, Forbidden, InvalidInput, KodyError
from kody.fetch import FetchRefused

log = logging.getLogger(__name__)
STATE_SALT = "kody.integrations.oauth-state"
STATE_TTL_SECONDS = 600
FRESH_SECONDS = 30


class ProviderError(KodyError):
    code = "oauth_provider_error"
    status = 502
    message = "The provider did not complete the token request."


class StateRefused(Forbidden):
    code = "oauth_state_invalid"
    message = "This authorization link is invalid, expired, already used, or not yours."


class NoRefreshToken(Conflict):
    code = "no_refresh_token"
    message = "This integration has no refresh token; connect it again."


@dataclass(frozen=True)
class Started:
    integration: UserIntegration
    authorize_url: str


def redirect_uri() -> str:
    return settings.SITE_URL.rstrip("/") + reverse("packages:integration_callback")


def _cache_key(nonce: str) -> str:
    return f"integration-oauth-state:v1:{nonce}"


def begin(user_id: str, row: UserIntegration, app: OAuthApp) -> Started:
    """The provider's authorization URL for ``row``, with a fresh single-use state."""
    nonce = pysecrets.token_urlsafe(24)
    state = signing.dumps({"u": user_id, "n": nonce}, salt=STATE_SALT)
    verifier = generate_token(64) if app.pkce else None
    cache.set(
        _cache_key(nonce),
        {"user": user_id, "name": row.name, "verifier": verifier, "redirect": redirect_uri()},
        timeout=STATE_TTL_SECONDS,
    )
    session = session_for(app, redirect_uri=redirect_uri(), scope=app.scope_text(row.scopes_json))
    url, _ = session.create_authorization_url(
        app.authorize_url, state=state, code_verifier=verifier, **app.extra_authorize_params
    )
    log.info("integration authorize started: user=%s integration=%s", user_id[:8], row.name)
    return Started(row, url)


def claim_state(user_id: str, state: str) -> dict[str, Any]:
    """The pending flow ``state`` started, if it is genuine, fresh, the signed-in user's, and
    not used before; it can never be claimed again."""
    try:
        signed = signing.loads(state, salt=STATE_SALT, max_age=STATE_TTL_SECONDS)
    except signing.BadSignature:  # SignatureExpired is one
        raise StateRefused() from None
    if not isinstance(signed, dict) or signed.get("u") != user_id:
        raise StateRefused()
    key = _cache_key(str(signed.get("n")))
    pending = cache.get(key)
    # Deleting is the claim: of two deliveries of one state only one deletes the entry.
    if not isinstance(pending, dict) or not cache.delete(key) or pending.get("user") != user_id:
        raise StateRefused()
    return pending


def complete(user_id: str, state: str, code: str | None, error: str | None) -> UserIntegration:
    pending = claim_state(user_id, state)
    row = connections.get(user_id, str(pending["name"]))
    if error:
        raise ProviderError(
            "The provider refused the authorization.", details={"error": error[:100]}
        )
    if not code:
        raise InvalidInput("The callback carries no code.", details={"field": "code"})
    app = connections.app_of(user_id, row)
    session = session_for(app, redirect_uri=pending["redirect"])
    token = _token_call(
        lambda: session.fetch_token(
            app.token_url,
            code=code,
            code_verifier=pending.get("verifier") or None,
            redirect_uri=pending["redirect"],
            state=state,
        ),
        row.name,
    )
    with transaction.atomic():
        row = UserIntegration.objects.select_for_update().get(pk=row.pk)
        tokens.store_tokens(user_id, row, token)
        User.objects.filter(stable_user_id=user_id, first_integration_at__isnull=True).update(
            first_integration_at=timezone.now()
        )
    log.info("integration connected: user=%s integration=%s", user_id[:8], row.name)
    return row


def _token_call(call: Any, name: str) -> dict[str, Any]:
    """Run one token request; every failure becomes a coded error that quotes no token."""
    try:
        token = call()
    except (OAuthError, OAuth2Error) as exc:
        error = str(getattr(exc, "error", "") or "error")[:100]
        log.warning("integration token request refused: integration=%s error=%s", name, error)
        raise ProviderError(details={"error": error}) from None
    except FetchRefused as exc:
        log.warning("integration token request blocked: integration=%s reason=%s", name, exc)
        raise ProviderError(
            "The token URL may not be reached from Kody.", details={"error": "fetch_refused"}
        ) from None
    except (requests.RequestException, ValueError) as exc:
        log.warning("integration token request failed: integration=%s %s", name, type(exc).__name__)
        raise ProviderError(details={"error": type(exc).__name__}) from None
    if not isinstance(token, dict) or not token.get("access_token"):
        raise ProviderError(details={"error": "no_access_token"})
    return dict(token)


def refresh(user_id: str, name: str) -> tuple[UserIntegration, bool]:
    """Refresh the integration's tokens once however many callers ask at the same time;
    the bool says whether this call spent the refresh token."""
    row = connections.get(user_id, name)
    if not row.refresh_token_secret_name:
        raise NoRefreshToken(details={"name": name})
    seen = tokens.refresh_fingerprint(user_id, row)
    with transaction.atomic():
        row = UserIntegration.objects.select_for_update().get(pk=row.pk)
        if tokens.refresh_fingerprint(user_id, row) != seen or _fresh(row):
            return row, False
        current = tokens.read_refresh_token(user_id, row)
        if current is None:
            raise NoRefreshToken(details={"name": name})
        app = connections.app_of(user_id, row)
        session = session_for(app, scope=None)
        token = _token_call(
            lambda: session.refresh_token(app.token_url, refresh_token=current), row.name
        )
        tokens.store_tokens(user_id, row, token, refreshed=True)
    log.info("integration token refreshed: user=%s integration=%s", user_id[:8], name)
    return row, True


def _fresh(row: UserIntegration) -> bool:
    refreshed = row.token_refreshed_at
    return refreshed is not None and timezone.now() - refreshed < timedelta(seconds=FRESH_SECONDS)


def live_access_token(user_id: str, name: str) -> str | None:
    """The integration's access token for a request Kody makes itself, refreshed first (under
    the same lock as ``integrationTokenRefresh``) when it has expired; None when there is no
    usable token. The value goes into that one request and nowhere else."""
    token = tokens.read_access_token(user_id, name)
    if token is not None:
        return token
    row = UserIntegration.objects.filter(user_id=user_id, name=name).first()
    if row is None or not row.refresh_token_secret_name:
        return None
    refresh(user_id, name)
    return tokens.read_access_token(user_id, name)
