"""The person's remote MCP servers: add, list, reconnect, refresh, enable, remove, call.

The URL is hostile input. It must be https (plain http only under the test setting that lets
loopback through), carry no credentials of its own, and resolve to public addresses only; a
URL that fails is refused with a coded 422 before anything is written. Every later connection
goes through the guarded client again (``mcp_client``), so a name that starts resolving to a
private address afterwards is refused at connect time too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx2
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.packages.actor.mcp_hub import McpClientHub, Probe, ServerNameTaken, ServerNotFound
from apps.packages.models import McpServerSetting
from apps.packages.services import mcp_client
from apps.packages.services import mcp_credentials as credentials
from apps.packages.services.mcp_oauth import AuthorizationPending
from kody import netguard
from kody.errors import Conflict, InvalidInput, KodyError, NotFound
from kody.fetch import FetchRefused, resolve_checked

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")
MAX_URL = 2048
AUTHORIZE_WINDOW = timedelta(minutes=15)
T = TypeVar("T")


class UrlInvalid(InvalidInput):
    code = "mcp_server_url_invalid"
    message = "The URL must be an https URL without credentials in it."


class UrlRefused(InvalidInput):
    code = "mcp_server_url_refused"
    message = "That address is not a public internet address; Kody will not connect to it."


class ServerDisabled(Conflict):
    code = "mcp_server_disabled"
    message = "This MCP server is disabled; enable it to call its tools."


class ServerUnreachable(KodyError):
    code = "mcp_server_unreachable"
    status = 502
    message = "The MCP server could not be reached or did not answer as an MCP server."


class ServerNeedsAuthorization(KodyError):
    code = "mcp_server_auth_required"
    status = 502
    message = "The MCP server asks for authorization."


class ResultTooLarge(KodyError):
    code = "mcp_server_reply_too_large"
    status = 502
    message = "The MCP server's reply is too large."


def check_url(url: str) -> str:
    url = url.strip()
    try:
        parts = urlsplit(url)
        netguard.check_url(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except (FetchRefused, ValueError):
        raise UrlInvalid(details={"url": url[:200]}) from None
    if len(url) > MAX_URL or parts.fragment or not parts.hostname:
        raise UrlInvalid(details={"url": url[:200]})
    try:
        resolve_checked(parts.hostname, port)
    except (FetchRefused, ValueError):
        raise UrlRefused(details={"host": parts.hostname}) from None
    return url


def check_name(name: str) -> str:
    name = name.strip()
    if not NAME_RE.match(name):
        raise InvalidInput(
            "A server name is 1-64 letters, digits, spaces, '_', '.' or '-'.",
            code="mcp_server_name_invalid",
        )
    return name


def _probe_of(failure: mcp_client.RemoteFailure) -> Probe:
    status = "auth_required" if failure.reason == "auth_required" else "error"
    return {"status": status, "error": failure.detail, "at": timezone.now().isoformat()}


def _connected(server: mcp_client.Connected, tools: list[dict[str, Any]] | None) -> Probe:
    return {
        "status": "connected",
        "error": "",
        "serverName": server.server_name,
        "serverVersion": server.server_version,
        "protocolVersion": server.protocol_version,
        "tools": tools,
        "at": timezone.now().isoformat(),
    }


def _listing_probe(url: str, auth: httpx2.Auth | None = None) -> Probe:
    try:
        listing = mcp_client.list_tools(url, auth)
    except mcp_client.RemoteFailure as failure:
        if failure.reason == "refused":
            raise UrlRefused() from None
        return _probe_of(failure)
    except AuthorizationPending:
        return _probe_of(mcp_client.RemoteFailure("auth_required", "authorize Kody again"))
    return _connected(listing.server, listing.tools)


def add(user_id: str, name: str, url: str) -> dict[str, Any]:
    name, url = check_name(name), check_url(url)
    if McpServerSetting.objects.filter(user_id=user_id, name=name).exists():
        # Checked again by the hub under the owner's lock; this spares the remote round trip.
        raise ServerNameTaken(details={"name": name})
    probe = _listing_probe(url)
    server_id = uuid.uuid4().hex
    McpClientHub.call(user_id, "add_server", server_id=server_id, name=name, url=url, probe=probe)
    return get(user_id, server_id)


def _setting(user_id: str, server_id: str) -> McpServerSetting:
    found = McpServerSetting.objects.filter(user_id=user_id, id=server_id).first()
    if found is None:
        raise ServerNotFound(details={"serverId": server_id})
    return found


def _states(user_id: str) -> dict[str, dict[str, Any]]:
    states: dict[str, dict[str, Any]] = McpClientHub.call(user_id, "states")
    return states


def server_json(row: McpServerSetting, state: dict[str, Any] | None) -> dict[str, Any]:
    state = state or {}
    tools = state.get("tools") or []
    return {
        "id": row.id,
        "name": row.name,
        "url": row.url,
        "enabled": row.enabled,
        "status": state.get("status", "unknown"),
        "lastError": state.get("lastError"),
        "serverName": state.get("serverName"),
        "serverVersion": state.get("serverVersion"),
        "connectedAt": state.get("connectedAt"),
        "refreshedAt": state.get("refreshedAt"),
        "toolCount": len(tools),
        "tools": [{k: t[k] for k in ("name", "title", "description") if k in t} for t in tools],
        "createdAt": row.created_at.isoformat(),
        # Where the person authorizes Kody when the server asks for it (agents pass it on).
        "authorizePage": (
            settings.SITE_URL.rstrip("/") + reverse("packages:mcp_server", args=[row.id])
            if state.get("status") == "auth_required"
            else None
        ),
    }


def listing(user_id: str) -> list[dict[str, Any]]:
    rows = list(McpServerSetting.objects.filter(user_id=user_id).order_by("name"))
    states = _states(user_id) if rows else {}
    return [server_json(row, states.get(row.id)) for row in rows]


def get(user_id: str, server_id: str) -> dict[str, Any]:
    row = _setting(user_id, server_id)
    return server_json(row, _states(user_id).get(row.id))


def tools(user_id: str, server_id: str) -> list[dict[str, Any]]:
    """The cached tools with their schemas."""
    row = _setting(user_id, server_id)
    cached: list[dict[str, Any]] = (_states(user_id).get(row.id) or {}).get("tools") or []
    return cached


def _attempt(user_id: str, row: McpServerSetting, work: Callable[[Any], T], used: list[Any]) -> T:
    creds = credentials.load_fresh(user_id, row.id, row.url)
    used.append(creds)
    auth = credentials.provider(row.url, creds)
    try:
        return work(auth)
    finally:
        credentials.persist(user_id, row.id, creds, auth)


def _authorized(user_id: str, row: McpServerSetting, work: Callable[[Any], T]) -> T:
    """Run ``work`` with the server's credentials. When the server refuses a token Kody holds
    (a 401 before the token's stated expiry: revoked, rotated), refresh it once and try once
    more before the caller reports ``auth_required``."""
    used: list[Any] = []
    try:
        return _attempt(user_id, row, work, used)
    except (AuthorizationPending, mcp_client.RemoteFailure) as exc:
        refused = isinstance(exc, AuthorizationPending) or exc.reason == "auth_required"
        if not (
            refused
            and used
            and credentials.refresh_after_refusal(user_id, row.id, row.url, used[0])
        ):
            raise
    return _attempt(user_id, row, work, [])


def reconnect(user_id: str, server_id: str) -> dict[str, Any]:
    row = _setting(user_id, server_id)
    try:
        probe = _connected(
            _authorized(user_id, row, lambda a: mcp_client.describe(row.url, a)), None
        )
    except mcp_client.RemoteFailure as failure:
        probe = _probe_of(failure)
    except AuthorizationPending:
        probe = _probe_of(mcp_client.RemoteFailure("auth_required", "authorize Kody again"))
    McpClientHub.call(user_id, "record_probe", server_id=row.id, probe=probe)
    return get(user_id, server_id)


def refresh(user_id: str, server_id: str) -> dict[str, Any]:
    row = _setting(user_id, server_id)
    try:
        listing = _authorized(user_id, row, lambda a: mcp_client.list_tools(row.url, a))
        probe = _connected(listing.server, listing.tools)
    except mcp_client.RemoteFailure as failure:
        if failure.reason == "refused":
            probe = {"status": "error", "error": UrlRefused.message, "at": _now()}
        else:
            probe = _probe_of(failure)
    except AuthorizationPending:
        probe = _probe_of(mcp_client.RemoteFailure("auth_required", "authorize Kody again"))
    McpClientHub.call(user_id, "record_probe", server_id=row.id, probe=probe)
    return {"server": get(user_id, server_id), "tools": tools(user_id, server_id)}


def _now() -> str:
    return timezone.now().isoformat()


def set_enabled(user_id: str, server_id: str, enabled: bool) -> dict[str, Any]:
    _setting(user_id, server_id)
    McpClientHub.call(user_id, "set_enabled", server_id=server_id, enabled=enabled)
    return get(user_id, server_id)


def remove(user_id: str, server_id: str) -> dict[str, Any]:
    _setting(user_id, server_id)
    removed: dict[str, Any] = McpClientHub.call(user_id, "remove_server", server_id=server_id)
    return removed


def call_tool(
    user_id: str, server_id: str, tool: str, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    row = _setting(user_id, server_id)
    if not row.enabled:
        raise ServerDisabled(details={"serverId": server_id})
    try:
        return _authorized(
            user_id, row, lambda a: mcp_client.call_tool(row.url, tool, arguments or {}, a)
        )
    except AuthorizationPending:
        raise ServerNeedsAuthorization(details={"serverId": server_id}) from None
    except mcp_client.RemoteFailure as failure:
        if failure.reason == "refused":
            raise UrlRefused() from None
        if failure.reason == "auth_required":
            raise ServerNeedsAuthorization(details={"serverId": server_id}) from None
        if failure.reason == "too_large":
            raise ResultTooLarge(failure.detail) from None
        raise ServerUnreachable(details={"serverId": server_id, "reason": failure.detail}) from None


class AuthorizationNotFound(NotFound):
    code = "mcp_server_authorization_not_found"
    message = "No authorization in progress matches this link; start again from the server's page."


def authorize_start(user_id: str, server_id: str) -> str:
    """The URL where the person authorizes Kody for this server (its OAuth flow has begun)."""
    row = _setting(user_id, server_id)
    creds = credentials.load(user_id, row.id)
    creds.tokens = None  # a fresh grant: stale tokens must not satisfy the server
    auth = credentials.provider(row.url, creds, start=True)
    try:
        mcp_client.describe(row.url, auth)
    except AuthorizationPending as pending:
        if auth is not None:
            auth.remember()
        sealed = credentials.seal(
            user_id, row.id, "pending", credentials.pending_blob(pending.verifier, pending.state)
        )
        McpClientHub.call(
            user_id,
            "begin_authorization",
            server_id=row.id,
            state_hash=hashlib.sha256(pending.state.encode()).hexdigest(),
            pending=sealed,
            oauth=credentials.seal(user_id, row.id, "oauth", creds.dumps()),
            expires_at=(timezone.now() + AUTHORIZE_WINDOW).isoformat(),
        )
        return pending.url
    except mcp_client.RemoteFailure as failure:
        raise ServerUnreachable(details={"serverId": server_id, "reason": failure.detail}) from None
    raise Conflict("This server did not ask for authorization.", code="mcp_server_no_auth_needed")


def authorize_finish(user_id: str, state: str, code: str) -> str:
    """Finish the flow the callback belongs to; the server's id."""
    found = McpClientHub.call(
        user_id, "pending", state_hash=hashlib.sha256(state.encode()).hexdigest()
    )
    if found is None:
        raise AuthorizationNotFound()
    server_id = found["serverId"]
    row = _setting(user_id, server_id)
    pending = json.loads(credentials.unseal(user_id, server_id, "pending", found["sealed"]))
    if not hmac.compare_digest(pending["state"], state):
        raise AuthorizationNotFound()
    creds = credentials.load(user_id, server_id, found["oauth"])
    auth = credentials.provider(row.url, creds, code=code, verifier=pending["verifier"])
    probe = _listing_probe(row.url, auth)
    if auth is not None:
        auth.remember()
    sealed = credentials.seal(user_id, server_id, "oauth", creds.dumps())
    McpClientHub.call(
        user_id, "finish_authorization", server_id=server_id, oauth=sealed, probe=probe
    )
    return server_id
