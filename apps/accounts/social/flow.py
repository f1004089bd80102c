"""The authorization-code round trip with a provider, on Authlib's OAuth 2 client.

``begin`` mints a ``state`` and a PKCE verifier, keeps them in the person's session (with what
the round trip is for: signing in, or linking to the signed-in account) and returns the
provider's authorization URL with an S256 challenge. ``complete`` takes the callback: the
``state`` must be one this session started for this provider within ``PENDING_SECONDS`` (each
is used once), then the code is exchanged with the verifier and the profile read — all through
the SSRF-guarded HTTP session. The provider's tokens are not kept.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from django.conf import settings
from django.http import HttpRequest

from apps.accounts.social import providers
from apps.accounts.social.providers import Profile, Provider, ProviderUnavailable
from kody import netguard
from kody.errors import KodyError
from kody.fetch import FetchRefused

logger = logging.getLogger(__name__)

SESSION_KEY = "social_sign_in"
PENDING_SECONDS = 600
MAX_PENDING = 4  # round trips one session may have open at once (a few tabs)
HTTP_TIMEOUT = 10
_ERROR_CODE = re.compile(r"^[a-z_]{1,64}$")


class StateMismatch(KodyError):
    code = "state_mismatch"
    status = 400
    message = (
        "This sign-in link does not belong to this browser session, or it has expired or was "
        "already used. Start the sign-in again."
    )


class ProviderError(KodyError):
    code = "provider_error"
    status = 400


@dataclass(frozen=True)
class Pending:
    provider: str
    intent: str  # "sign_in" | "link"
    user_id: int | None
    next_url: str
    verifier: str
    started: float


def callback_url(provider: Provider) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/auth/{provider.name}/callback"


def _client(provider: Provider) -> OAuth2Session:
    """Authlib's client on the SSRF-guarded transport (every hop checked, bodies capped)."""
    client: OAuth2Session = netguard.guarded_session(
        OAuth2Session,
        timeout=HTTP_TIMEOUT,
        client_id=provider.client_id,
        client_secret=provider.client_secret,
        scope=provider.scope,
        redirect_uri=callback_url(provider),
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_post",
        default_timeout=HTTP_TIMEOUT,
    )
    return client


def begin(
    request: HttpRequest, provider: Provider, *, intent: str, user_id: int | None, next_url: str
) -> str:
    verifier = generate_token(64)
    state = generate_token(32)
    url, _ = _client(provider).create_authorization_url(
        provider.authorize_url, state=state, code_verifier=verifier
    )
    now = time.time()
    open_ = {
        key: entry
        for key, entry in _entries(request).items()
        if now - float(entry.get("started", 0)) < PENDING_SECONDS
    }
    kept = sorted(open_.items(), key=lambda item: float(item[1]["started"]))[-(MAX_PENDING - 1) :]
    entries = dict(kept)
    entries[state] = {
        "provider": provider.name,
        "intent": intent,
        "user_id": user_id,
        "next_url": next_url,
        "verifier": verifier,
        "started": now,
    }
    request.session[SESSION_KEY] = entries
    return url


def _entries(request: HttpRequest) -> dict[str, dict[str, Any]]:
    raw = request.session.get(SESSION_KEY)
    return raw if isinstance(raw, dict) else {}


def _take(request: HttpRequest, provider: Provider, state: str) -> Pending:
    """The round trip this ``state`` names, removed from the session (a state works once)."""
    entries = _entries(request)
    found = None
    for key in list(entries):
        if state and hmac.compare_digest(key.encode(), state.encode()):
            found = entries.pop(key)
    request.session[SESSION_KEY] = entries
    if (
        found is None
        or found.get("provider") != provider.name
        or time.time() - float(found.get("started", 0)) >= PENDING_SECONDS
    ):
        raise StateMismatch()
    return Pending(
        provider=str(found["provider"]),
        intent=str(found["intent"]),
        user_id=found.get("user_id"),
        next_url=str(found.get("next_url") or "/account"),
        verifier=str(found["verifier"]),
        started=float(found["started"]),
    )


def complete(request: HttpRequest, provider: Provider) -> tuple[Pending, Profile]:
    params = request.GET
    pending = _take(request, provider, params.get("state", "")[:256])
    error = params.get("error")
    if error is not None:
        code = error if _ERROR_CODE.match(error) else "unknown_error"
        message = (
            f"You cancelled the sign-in at {provider.label}."
            if code == "access_denied"
            else f"{provider.label} did not sign you in (it answered “{code}”). Try again."
        )
        raise ProviderError(message, details={"provider": provider.name, "error": code})
    code = params.get("code", "")
    if not code or len(code) > 2048:
        raise ProviderError(
            f"{provider.label} sent no authorization code back. Start the sign-in again.",
            details={"provider": provider.name},
        )
    client = _client(provider)
    try:
        client.fetch_token(
            provider.token_url,
            grant_type="authorization_code",
            code=code,
            code_verifier=pending.verifier,
        )
    except OAuthError as exc:
        answered = exc.error if _ERROR_CODE.match(str(exc.error or "")) else "unknown_error"
        raise ProviderError(
            f"{provider.label} refused to finish the sign-in (it answered “{answered}”). "
            "Start the sign-in again.",
            details={"provider": provider.name, "error": answered},
        ) from exc
    except (FetchRefused, requests.RequestException, OSError, ValueError) as exc:
        # The reason is for the operator's log (it names the endpoint, never a token).
        logger.warning("social sign-in: token exchange failed: %s: %s", type(exc).__name__, exc)
        raise ProviderUnavailable(details={"provider": provider.name}) from exc
    return pending, providers.read_profile(provider, client)
