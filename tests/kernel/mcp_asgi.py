"""Drive ``/mcp`` in-process: the real ASGI router and MCP app, over httpx's ASGI transport.

Each POST is a complete JSON-RPC exchange (stateless JSON mode), so no session is opened.
Handlers reach the database from worker threads: tests using this must be transactional.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2

from kody.mcp.app import build_app, with_mcp

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def request(method: str, raw: str | None, body: bytes = b"", **headers: str) -> httpx2.Response:
    from config.asgi import django_application

    mcp_app = build_app()
    app = with_mcp(django_application, mcp_app)
    auth = {"Authorization": f"Bearer {raw}"} if raw else {}

    async def run() -> httpx2.Response:
        with anyio.fail_after(60):
            return await exchange()

    async def exchange() -> httpx2.Response:
        async with mcp_app.router.lifespan_context(mcp_app):
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://testserver") as c:
                return await c.request(
                    method, "/mcp", content=body, headers={**HEADERS, **auth, **headers}
                )

    return anyio.run(run)


def call_tool(raw: str, name: str, arguments: Any, *, raw_arguments: bytes | None = None) -> Any:
    """``tools/call`` and the JSON-RPC answer; ``raw_arguments`` is spliced in as given."""
    args = raw_arguments if raw_arguments is not None else json.dumps(arguments).encode()
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'
        + name.encode()
        + b'","arguments":'
        + args
        + b"}}"
    )
    return request("POST", raw, body)
