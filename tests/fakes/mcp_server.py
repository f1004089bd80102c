"""A real remote MCP server for tests: the SDK's own ``MCPServer`` over Streamable HTTP, served
by uvicorn on a loopback port in a thread (reachable only under ``KODY_FETCH_ALLOW_LOOPBACK``).

Its tools record what reached them in ``calls``; ``token`` (optional) makes every request
without ``Authorization: Bearer <token>`` a 401, as a server that asks for authorization.
With ``oauth`` (a ``tests.fakes.oauth_provider.OAuthProviderFake``) it is a protected resource
in the MCP authorization profile: RFC 9728 metadata naming that provider, a 401 pointing at it,
and only access tokens the provider issued are let through.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class McpServerFake:
    def __init__(
        self, *, token: str | None = None, oauth: Any = None, name: str = "fake-remote"
    ) -> None:
        self.token = token
        self.oauth = oauth
        self.calls: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        server = MCPServer(name, version="1.2.3")

        @server.tool()
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            self.calls.append({"tool": "add", "a": a, "b": b})
            return a + b

        @server.tool()
        def shout(text: str) -> str:
            """Upper-case a text."""
            self.calls.append({"tool": "shout", "text": text})
            return text.upper()

        self.server = server
        self.app = self._guarded(
            server.streamable_http_app(json_response=True, stateless_http=True)
        )
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def _guarded(self, app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                if scope["path"].startswith("/.well-known/oauth-protected-resource"):
                    await self._resource_metadata()(scope, receive, send)
                    return
                headers = dict(scope.get("headers") or [])
                auth = headers.get(b"authorization", b"").decode()
                self.authorizations.append(auth)
                if not self._allowed(auth):
                    challenge = 'Bearer error="invalid_token"'
                    if self.oauth is not None:
                        where = (
                            f"http://127.0.0.1:{self.port}/.well-known/oauth-protected-resource/mcp"
                        )
                        challenge += f', resource_metadata="{where}"'
                    denied = JSONResponse(
                        {"error": "invalid_token"},
                        status_code=401,
                        headers={"WWW-Authenticate": challenge},
                    )
                    await denied(scope, receive, send)
                    return
            await app(scope, receive, send)

        return guarded

    def _allowed(self, authorization: str) -> bool:
        if self.token is not None:
            return authorization == f"Bearer {self.token}"
        if self.oauth is not None:
            token = authorization.removeprefix("Bearer ")
            return authorization.startswith("Bearer ") and self.oauth.is_valid_access_token(token)
        return True

    def _resource_metadata(self) -> JSONResponse:
        if self.oauth is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        return JSONResponse({"resource": self.url, "authorization_servers": [self.oauth.base_url]})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> McpServerFake:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._uvicorn.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake MCP server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Shut the server down and wait until its port is closed."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._uvicorn = None

    def __exit__(self, *exc: object) -> None:
        self.stop()
