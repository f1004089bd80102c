"""The sealed OAuth material of a person's remote MCP servers: open it for one run of the SDK,
seal what the run changed. Sealed with the secret keyring (``crypto``), bound to the owner and
the server, so a ciphertext moved to another row or person does not open. Values never leave
the services: no reply, page, log line or export carries them."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.urls import reverse

from apps.packages.actor.mcp_hub import McpClientHub
from apps.packages.services import crypto, mcp_client
from apps.packages.services.mcp_oauth import AuthorizationPending, Credentials, KodyOAuth

REFRESH_MARGIN_SECONDS = 30
REFRESH_LOCK_SECONDS = 30


def _aad(user_id: str, server_id: str, kind: str) -> str:
    return f"mcp-hub:{kind}:{user_id}:{server_id}"


def seal(user_id: str, server_id: str, kind: str, plain: str) -> str:
    key_id, token = crypto.seal(plain, _aad(user_id, server_id, kind))
    return f"{key_id}:{token}"


def unseal(user_id: str, server_id: str, kind: str, sealed: str) -> str:
    if not sealed:
        return ""
    key_id, _, token = sealed.partition(":")
    return crypto.open_sealed(key_id, token, _aad(user_id, server_id, kind))


def redirect_uri() -> str:
    return settings.SITE_URL.rstrip("/") + reverse("packages:mcp_server_oauth_callback")


def load(user_id: str, server_id: str, sealed: str | None = None) -> Credentials:
    if sealed is None:
        sealed = McpClientHub.call(user_id, "oauth", server_id=server_id)["sealed"]
    return Credentials.loads(unseal(user_id, server_id, "oauth", sealed or ""))


def needs_refresh(creds: Credentials) -> bool:
    tokens = creds.tokens or {}
    return bool(
        tokens.get("refresh_token")
        and creds.expires_at is not None
        and creds.expires_at - REFRESH_MARGIN_SECONDS <= time.time()
    )


def load_fresh(user_id: str, server_id: str, url: str) -> Credentials:
    """The credentials, their access token refreshed first if it has (nearly) expired.

    Providers rotate refresh tokens: two callers refreshing with the same one would burn it
    and leave one of them unauthorized. So a refresh happens under a lock per person and
    server, and a caller that waited reads the credentials again and finds them fresh.
    """
    creds = load(user_id, server_id)
    if not needs_refresh(creds):
        return creds
    key = f"mcp-oauth-refresh:{user_id}:{server_id}"
    with cache.lock(key, timeout=REFRESH_LOCK_SECONDS, blocking_timeout=REFRESH_LOCK_SECONDS):
        creds = load(user_id, server_id)
        if needs_refresh(creds):
            auth = provider(url, creds)
            try:
                # The SDK refreshes an expired token before it sends the request.
                mcp_client.describe(url, auth)
            except (mcp_client.RemoteFailure, AuthorizationPending):
                pass  # the caller's own request reports the state of things
            finally:
                persist(user_id, server_id, creds, auth)
    return creds


def _access(creds: Credentials) -> str:
    return str((creds.tokens or {}).get("access_token") or "")


def refresh_after_refusal(user_id: str, server_id: str, url: str, used: Credentials) -> bool:
    """The server answered 401 to the access token in ``used`` (revoked, or expired before its
    stated lifetime): refresh it once, under the same lock as ``load_fresh``. True when the
    stored credentials now hold another access token (this caller's refresh or one that
    finished while it waited), so the request is worth one more try."""
    held = _access(used)
    if not held or not (used.tokens or {}).get("refresh_token"):
        return False
    key = f"mcp-oauth-refresh:{user_id}:{server_id}"
    with cache.lock(key, timeout=REFRESH_LOCK_SECONDS, blocking_timeout=REFRESH_LOCK_SECONDS):
        creds = load(user_id, server_id)
        if _access(creds) and _access(creds) != held:
            return True
        if not (creds.tokens or {}).get("refresh_token"):
            return False
        # The server says the token is no good: treat it as expired so the SDK refreshes it
        # before sending (an expiry of 0 would read as "never expires").
        creds.expires_at = 1.0
        auth = provider(url, creds)
        try:
            mcp_client.describe(url, auth)
        except (mcp_client.RemoteFailure, AuthorizationPending):
            pass  # the retried request reports the state of things
        finally:
            persist(user_id, server_id, creds, auth)
        return bool(_access(creds)) and _access(creds) != held


def provider(url: str, creds: Credentials, **flow: Any) -> KodyOAuth | None:
    """The SDK's OAuth provider over ``creds``; None for a server never authorized (and not
    being authorized now), which is then called without OAuth."""
    if not creds.tokens and not creds.client_info and not flow.get("start"):
        return None
    flow.pop("start", None)
    return KodyOAuth(url, redirect_uri(), creds, **flow)


def persist(
    user_id: str, server_id: str, creds: Credentials, auth: KodyOAuth | None = None
) -> None:
    if auth is not None:
        auth.remember()
    if creds.changed:
        sealed = seal(user_id, server_id, "oauth", creds.dumps())
        McpClientHub.call(user_id, "save_oauth", server_id=server_id, sealed=sealed)


def pending_blob(verifier: str, state: str) -> str:
    return json.dumps({"verifier": verifier, "state": state})
