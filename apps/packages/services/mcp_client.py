"""Talking to a person's remote MCP server with the official ``mcp`` SDK's client.

Design note. Each operation opens one Streamable HTTP session, does its work and closes it:
no connection outlives a request, so any worker can serve any call and nothing about a remote
session sits in memory. Every socket goes through ``kody.netguard``'s client, which connects
only to addresses that pass the same check as ``kody.fetch`` (on the first request, on each
redirect the SDK follows within the origin, and on every reconnect), so a name that resolves
to our own network is refused even when it changed after the URL was saved. Whatever the
server sends back is bounded: tool lists and call results above their caps are refused rather
than stored or relayed. Errors come back as ``RemoteFailure`` with a short reason that is safe
to show (no response bodies, no headers).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from apps.packages.services.mcp_oauth import AuthorizationPending
from kody import netguard
from kody.fetch import FetchRefused

T = TypeVar("T")

DEADLINE_SECONDS = 20.0
MAX_TOOLS = 200
MAX_TOOLS_BYTES = 512 * 1024
MAX_RESULT_BYTES = 1024 * 1024
MAX_BODY_BYTES = 4 * MAX_RESULT_BYTES
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


@dataclass
class RemoteFailure(Exception):
    reason: str  # "auth_required", "refused" (SSRF), "unreachable", "protocol", "too_large"
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


@dataclass(frozen=True)
class Connected:
    server_name: str
    server_version: str
    protocol_version: str


@dataclass(frozen=True)
class Listing:
    server: Connected
    tools: list[dict[str, Any]]


def describe(url: str, auth: httpx2.Auth | None = None) -> Connected:
    """Connect and initialize: the server's identity, or ``RemoteFailure``."""

    async def work(session: ClientSession, server: Connected) -> Connected:
        return server

    return _run(url, work, auth)


def list_tools(url: str, auth: httpx2.Auth | None = None) -> Listing:
    async def work(session: ClientSession, server: Connected) -> Listing:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = {"cursor": cursor} if cursor else None
            page = await session.list_tools(params=params)  # type: ignore[arg-type]
            for tool in page.tools:
                dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
                tools.append({k: dumped[k] for k in TOOL_FIELDS if k in dumped})
                if len(tools) > MAX_TOOLS:
                    raise RemoteFailure("too_large", f"the server lists over {MAX_TOOLS} tools")
            cursor = page.next_cursor
            if not cursor:
                break
        if len(json.dumps(tools)) > MAX_TOOLS_BYTES:
            raise RemoteFailure("too_large", "the server's tool list is too large to cache")
        return Listing(server, tools)

    return _run(url, work, auth)


def call_tool(
    url: str, tool: str, arguments: dict[str, Any], auth: httpx2.Auth | None = None
) -> dict[str, Any]:
    async def work(session: ClientSession, server: Connected) -> dict[str, Any]:
        result = await session.call_tool(tool, arguments)
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        reply = {
            "content": dumped.get("content", []),
            "structuredContent": dumped.get("structuredContent"),
            "isError": bool(dumped.get("isError", False)),
        }
        if len(json.dumps(reply)) > MAX_RESULT_BYTES:
            raise RemoteFailure("too_large", "the tool's result is over 1 MiB")
        return reply

    return _run(url, work, auth)


def _run(
    url: str,
    work: Callable[[ClientSession, Connected], Awaitable[T]],
    auth: httpx2.Auth | None = None,
) -> T:
    statuses: list[int] = []

    async def note(response: httpx2.Response) -> None:
        statuses.append(response.status_code)
        # A declared body above the cap is refused before it is read. (A chunked body has no
        # length to check; the result cap below still keeps it out of replies and storage.)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            raise RemoteFailure("too_large", "the server's response is too large")

    async def session() -> T:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with netguard.guarded_async_client(auth=auth) as http:
                http.event_hooks["response"].append(note)
                async with streamable_http_client(url, http_client=http) as streams:
                    async with ClientSession(
                        streams[0], streams[1], read_timeout_seconds=DEADLINE_SECONDS
                    ) as client:
                        init = await client.initialize()
                        server = Connected(
                            init.server_info.name,
                            init.server_info.version,
                            str(init.protocol_version),
                        )
                        return await work(client, server)

    try:
        return anyio.run(session)
    except BaseException as exc:  # the SDK's task groups raise exception groups
        raise _classify(exc, statuses) from None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the guarded client wraps the refusal in transport errors
        if seen is None:
            return False
        if isinstance(seen, FetchRefused):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _classify(exc: BaseException, statuses: list[int]) -> RemoteFailure:
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, RemoteFailure):
            return leaf
        if isinstance(leaf, KeyboardInterrupt | SystemExit | AuthorizationPending):
            raise leaf
        if isinstance(leaf, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
            return RemoteFailure("auth_required", "authorization with the server failed")
    if 401 in statuses or 403 in statuses:
        return RemoteFailure("auth_required", "the server asks for authorization")
    if any(_refused(leaf) for leaf in leaves):
        return RemoteFailure("refused", "the address is not a public internet address")
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            return RemoteFailure("unreachable", "the server did not answer in time")
        if isinstance(leaf, httpx2.TransportError):
            return RemoteFailure("unreachable", "could not connect to the server")
        if isinstance(leaf, MCPError):
            bad = [s for s in statuses if s >= 400]
            suffix = f" (HTTP {bad[-1]})" if bad else ""
            return RemoteFailure("protocol", f"the server answered with an error{suffix}")
    return RemoteFailure("protocol", "the server did not speak MCP as expected")
