"""The MCP server: the capability registry as MCP tools, on the official SDK's low-level Server.

Handlers are async (the SDK runs on anyio); everything that touches Django runs in a worker
thread through ``db_call``, which drops stale connections before and after like Django's own
request cycle does. Domain errors come back as tool results with ``isError`` set and the same
``{"error": {...}}`` body the HTTP API uses; an unknown tool is a JSON-RPC invalid-params error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from kody.callers import bearer_backend
from kody.capabilities import Capability, Context, get, invoke, visible_to
from kody.errors import KodyError, Unauthenticated
from kody.outage import unavailable

logger = logging.getLogger(__name__)

SERVER_NAME = "kody"
SERVER_VERSION = "1.0.0"
INSTRUCTIONS = (
    "Kody acts for the person who owns this token. Every tool reads and writes only that "
    "person's data. Errors come back as results with isError set and a JSON body "
    '{"error": {"code", "message", "details"}}.'
)
TOKEN_CLAIM = "kody_token_id"

T = TypeVar("T")


async def db_call(fn: Callable[..., T], *args: Any) -> T:
    def run() -> T:
        close_old_connections()
        try:
            return fn(*args)
        finally:
            close_old_connections()

    return await sync_to_async(run, thread_sensitive=False)()


# The caller's own addition to ``instructions``, set by the HTTP layer for an ``initialize``
# request (kody.mcp.app) and read when the SDK builds the reply, in the same request's task.
CALLER_INSTRUCTIONS: ContextVar[str] = ContextVar("kody_caller_instructions", default="")


class KodyServer(Server[Any]):
    def create_initialization_options(self, *args: Any, **kwargs: Any) -> Any:
        options = super().create_initialization_options(*args, **kwargs)
        extra = CALLER_INSTRUCTIONS.get()
        if extra:
            options = options.model_copy(update={"instructions": f"{INSTRUCTIONS}\n\n{extra}"})
        return options


def build_server() -> Server[Any]:
    return KodyServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        title="Kody",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    try:
        tools = await db_call(_visible_tools, _token_id(ctx))
    except KodyError as exc:
        raise MCPError(types.INVALID_REQUEST, exc.message, exc.as_dict()) from exc
    except Exception as exc:
        down = unavailable(exc)
        if down is None:
            raise
        raise MCPError(types.INTERNAL_ERROR, down.message, _error_body(down)["error"]) from exc
    return types.ListToolsResult(tools=tools)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if get(params.name) is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    try:
        result = await db_call(_invoke, _token_id(ctx), params.name, params.arguments, _ip(ctx))
    except KodyError as exc:
        return _error_result(exc)
    except Exception as exc:
        down = unavailable(exc)
        if down is not None:
            logger.warning("MCP tool %s refused: %s", params.name, down.code)
            return _error_result(down)
        # The SDK would put str(exc) in the result: a driver message is not for the client.
        logger.exception("MCP tool %s crashed", params.name)
        return _error_result(KodyError("Something went wrong on our side.", code="internal_error"))
    return _success_result(result)


def _caller(token_id: int, ip: str | None = None) -> Context:
    # The token was checked moments ago at the HTTP layer; this catches a revoke in between.
    token = bearer_backend().token_by_id(token_id)
    if token is None:
        raise Unauthenticated()
    return Context(user=token.user, token=token, surface="mcp", ip=ip)


def _visible_tools(token_id: int) -> list[types.Tool]:
    return [_tool(cap) for cap in visible_to(_caller(token_id))]


def _invoke(token_id: int, name: str, arguments: Mapping[str, Any] | None, ip: str | None) -> Any:
    return invoke(name, _caller(token_id, ip), arguments)


def _tool(cap: Capability) -> types.Tool:
    return types.Tool(
        name=cap.name,
        title=cap.title or None,
        description=cap.description,
        input_schema=dict(cap.input_schema),
        output_schema=dict(cap.output_schema) if cap.output_schema is not None else None,
        annotations=types.ToolAnnotations(
            title=cap.title or None, read_only_hint=not cap.mutates, open_world_hint=False
        ),
    )


def _success_result(result: Any) -> types.CallToolResult:
    text = json.dumps(result, separators=(",", ":"), default=str)
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def _error_body(exc: KodyError) -> dict[str, Any]:
    body = {"error": exc.as_dict()}
    retry_after = getattr(exc, "retry_after_seconds", None)
    if retry_after:
        # A tool result has no HTTP status of its own; the same hint rides in the details.
        body["error"]["details"] = {**exc.details, "status": exc.status, "retryAfter": retry_after}
    return body


def _error_result(exc: KodyError) -> types.CallToolResult:
    body = _error_body(exc)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, default=str))], is_error=True
    )


def _token_id(ctx: ServerRequestContext[Any]) -> int:
    user = ctx.request.scope.get("user") if ctx.request is not None else None
    if not isinstance(user, AuthenticatedUser):
        # The HTTP layer refuses unauthenticated requests; reaching here is a wiring bug.
        raise MCPError(types.INTERNAL_ERROR, "request reached the MCP server without a token")
    return int((user.access_token.claims or {})[TOKEN_CLAIM])


def _ip(ctx: ServerRequestContext[Any]) -> str | None:
    client = ctx.request.scope.get("client") if ctx.request is not None else None
    return client[0] if client else None
