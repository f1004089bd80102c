"""The ``/mcp`` ASGI app and the router that puts it in front of Django.

The SDK's Streamable HTTP session manager runs stateless with JSON responses: every POST is a
complete JSON-RPC exchange, so any worker process can answer any request and nothing about a
session lives in memory, and no server-initiated stream is offered: ``GET /mcp`` is a 405.
Bearer tokens are checked by the SDK's auth middleware through a verifier that asks the
``KODY_BEARER_BACKEND`` (kody.callers), so a missing or bad token gets a 401 with
``WWW-Authenticate: Bearer`` before the MCP layer sees the request. The session manager needs
the ASGI lifespan (uvicorn and hypercorn send it); ``with_mcp`` forwards lifespan to this app.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from mcp.server.auth.provider import AccessToken as McpAccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kody.callers import bearer_backend
from kody.mcp.server import TOKEN_CLAIM, build_server, db_call
from kody.outage import ServiceUnavailable, unavailable

MCP_PATH = "/mcp"
log = logging.getLogger("kody.outage")


class DjangoTokenVerifier:
    async def verify_token(self, token: str) -> McpAccessToken | None:
        found = await db_call(bearer_backend().authenticate_bearer, token)
        if found is None:
            return None
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
        auth=AuthSettings(issuer_url=settings.SITE_URL, resource_server_url=None),
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

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if _is_mcp(scope) and scope.get("method") == "GET":
            await _no_stream(scope, receive, send)
        elif scope["type"] == "lifespan":
            await mcp_app(scope, receive, send)
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
