"""The ``/mcp`` ASGI app and the router that puts it in front of Django.

The SDK's Streamable HTTP session manager runs stateless with JSON responses: every POST is a
complete JSON-RPC exchange, so any worker process can answer any request and nothing about a
session lives in memory, and no server-initiated stream is offered: ``GET /mcp`` is a 405.
Bearer tokens are checked by the SDK's auth middleware through a verifier that asks the
``KODY_BEARER_BACKEND`` (kody.callers) — personal access tokens and OAuth access tokens alike —
and refuses an OAuth token issued for another resource, so a missing, bad or foreign token gets
a 401 with ``WWW-Authenticate: Bearer …, resource_metadata="…"`` (RFC 9728) before the MCP layer
sees the request; MCP clients start OAuth discovery from that header. The session manager needs
the ASGI lifespan (uvicorn and hypercorn send it); ``with_mcp`` forwards lifespan to this app.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string
from mcp.server.auth.provider import AccessToken as McpAccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kody.callers import bearer_backend
from kody.mcp.server import CALLER_INSTRUCTIONS, TOKEN_CLAIM, build_server, db_call
from kody.outage import ServiceUnavailable, unavailable

MCP_PATH = "/mcp"
log = logging.getLogger("kody.outage")


def mcp_resource() -> str:
    """This endpoint's resource identifier: the audience OAuth tokens must carry (RFC 8707)."""
    return settings.SITE_URL.rstrip("/") + MCP_PATH


def for_this_resource(audience: list[str] | None) -> bool:
    if audience is None:  # a personal access token: not bound to one resource
        return True
    ours = mcp_resource().lower()
    return any(str(a).rstrip("/").lower() == ours for a in audience)


def _accept(raw: str) -> Any:
    backend = bearer_backend()
    found = backend.authenticate_bearer(raw)
    if found is None or not for_this_resource(getattr(found, "audience", None)):
        return None
    note = getattr(backend, "note_mcp_use", None)
    if note is not None:
        note(found)
    return found


# Set for a POST whose body holds an ``initialize`` request (``_with_valid_ids`` reads it).
INITIALIZING: ContextVar[bool] = ContextVar("kody_mcp_initializing", default=False)


def _caller_instructions(found: Any) -> str:
    """The person's addition to ``initialize``'s instructions (``KODY_MCP_INSTRUCTIONS`` names
    the callable; the kernel does not know where the apps keep them)."""
    dotted = getattr(settings, "KODY_MCP_INSTRUCTIONS", "")
    if not dotted:
        return ""
    text = import_string(dotted)(found.user.stable_user_id)
    return str(text or "")


class DjangoTokenVerifier:
    async def verify_token(self, token: str) -> McpAccessToken | None:
        found = await db_call(_accept, token)
        if found is None:
            return None
        if INITIALIZING.get():
            # Only for initialize: every other request pays nothing for it.
            CALLER_INSTRUCTIONS.set(await db_call(_caller_instructions, found))
        return McpAccessToken(
            token=found.token_prefix,  # the SDK never needs the secret again; do not keep it
            client_id=found.principal_id,
            scopes=list(found.scopes),
            expires_at=int(found.expires_at.timestamp()) if found.expires_at else None,
            subject=found.user.stable_user_id,
            claims={TOKEN_CLAIM: found.pk},
        )


def build_app() -> Starlette:
    app = build_server().streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=True,
        stateless_http=True,
        transport_security=transport_security(),
        # resource_server_url puts resource_metadata="…/.well-known/oauth-protected-resource/mcp"
        # in the 401 challenge (RFC 9728); the verifier checks the audience itself.
        auth=AuthSettings(
            issuer_url=settings.SITE_URL,
            # pydantic (the SDK's) validates the URL string into its URL type.
            resource_server_url=mcp_resource(),  # type: ignore[arg-type]
            validate_token_resource=False,
        ),
        token_verifier=DjangoTokenVerifier(),
    )
    # Starlette gives the handler registered for Exception to its outermost error middleware:
    # the token check runs in the auth middleware, outside any route, so an outage there would
    # otherwise leave as a bare 500.
    app.add_exception_handler(Exception, _server_error)
    return app


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    down = _outage_in(exc)
    if down is None:
        message = "Something went wrong on our side."
        body = {"error": {"code": "internal_error", "message": message, "details": {}}}
        return JSONResponse(body, status_code=500)
    headers = {"Retry-After": str(down.retry_after_seconds)}
    return JSONResponse({"error": down.as_dict()}, status_code=down.status, headers=headers)


async def _answering_outages(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    try:
        await app(scope, receive, send)
    except Exception as exc:
        down = _outage_in(exc)
        if down is None:
            raise
        # Starlette's error middleware answered it (``_server_error``: a coded 503) and raised
        # it again for the server to log as a crash; an outage is not one.
        log.warning("MCP request refused: %s (%s)", down.code, type(exc).__name__)


def _outage_in(exc: BaseException) -> ServiceUnavailable | None:
    # Task groups wrap what failed inside them; any outage among the leaves decides.
    if isinstance(exc, BaseExceptionGroup):
        for each in exc.exceptions:
            found = _outage_in(each)
            if found is not None:
                return found
        return None
    return unavailable(exc)


def transport_security() -> TransportSecuritySettings:
    """Host/Origin checks mirroring ALLOWED_HOSTS; Django's wildcard forms switch them off."""
    hosts = list(settings.ALLOWED_HOSTS)
    if not hosts or any(h == "*" or h.startswith(".") for h in hosts):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    origins = [settings.SITE_URL.rstrip("/")]
    for host in hosts:
        origins += [
            f"{scheme}://{host}{port}" for scheme in ("http", "https") for port in ("", ":*")
        ]
    return TransportSecuritySettings(
        allowed_hosts=[pattern for host in hosts for pattern in (host, f"{host}:*")],
        allowed_origins=origins,
    )


def with_mcp(django_app: ASGIApp, mcp_app: ASGIApp) -> Any:
    """One ASGI callable: ``/mcp`` and the lifespan go to the MCP app, the rest to Django."""

    async def checked_ids(scope: Scope, receive: Receive, send: Send) -> None:
        await _with_valid_ids(mcp_app, scope, receive, send)

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if _is_mcp(scope) and scope.get("method") == "GET":
            await _no_stream(scope, receive, send)
        elif scope["type"] == "lifespan":
            await mcp_app(scope, receive, send)
        elif _is_mcp(scope) and scope.get("method") == "POST":
            await _answering_outages(checked_ids, scope, receive, send)
        elif _is_mcp(scope):
            await _answering_outages(mcp_app, scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application


def _is_mcp(scope: Scope) -> bool:
    path = scope.get("path", "")
    return scope["type"] == "http" and (path == MCP_PATH or path.startswith(MCP_PATH + "/"))


async def _no_stream(scope: Scope, receive: Receive, send: Send) -> None:
    # Stateless JSON mode has nothing to push; without this the SDK holds the GET open, silent.
    body = {
        "error": {
            "code": "method_not_allowed",
            "message": "This server offers no server-initiated stream; POST JSON-RPC to /mcp.",
            "details": {},
        }
    }
    response = JSONResponse(body, status_code=405, headers={"Allow": "POST, DELETE"})
    await response(scope, receive, send)


# JSON-RPC 2.0: an id is a string or a number (integers here, as fractional ids are
# discouraged and the SDK cannot echo them faithfully). A message with ``"id": null``, a
# fraction, a boolean, an object or an array would otherwise be taken for a notification and
# answered with a silent 202; it gets an Invalid Request error instead.
INVALID_REQUEST = -32600
_MAX_CHECKED_BODY = 4 * 1024 * 1024


def _bad_id(message: Any) -> bool:
    if not isinstance(message, dict) or "id" not in message:
        return False
    value = message["id"]
    return isinstance(value, bool) or not isinstance(value, (str, int))


async def _with_valid_ids(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            await app(scope, _replay(chunks, message, receive), send)
            return
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = message.get("more_body", False)
        if size > _MAX_CHECKED_BODY:
            break  # too big to be ours to judge; the SDK and its limits decide
    body = b"".join(chunks)
    if not more:
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None  # not ours to judge: the SDK refuses it with a JSON-RPC error
        batch = parsed if isinstance(parsed, list) else [parsed]
        if any(isinstance(item, dict) and item.get("method") == "initialize" for item in batch):
            INITIALIZING.set(True)
        if any(_bad_id(item) for item in batch):
            error = {
                "code": INVALID_REQUEST,
                "message": "Invalid Request: id must be a string or an integer",
            }
            response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=400)
            await response(scope, receive, send)
            return
    await app(scope, _replay([body], None, receive, more_body=more), send)


def _replay(
    chunks: list[bytes], pending: Any, receive: Receive, *, more_body: bool = False
) -> Receive:
    """A ``receive`` that hands back what was already read, then carries on."""
    queue: list[dict[str, Any]] = []
    if chunks:
        queue.append({"type": "http.request", "body": b"".join(chunks), "more_body": more_body})
    if pending is not None:
        queue.append(pending)

    async def replayed() -> Any:
        if queue:
            return queue.pop(0)
        return await receive()

    return replayed
