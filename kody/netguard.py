"""HTTP clients for URLs someone outside handed us: OAuth endpoints, remote MCP servers.

Two client stacks need the same guarantee as ``kody.fetch`` (every hop resolved once, refused
unless every address is globally routable, the connection pinned to the checked address):

* ``guarded_session()`` — a ``requests`` session (Authlib's ``OAuth2Session`` is one) whose
  adapter sends each request through ``kody.sandbox.netfetch`` one hop at a time, so the
  session's own redirect handling re-checks every ``Location``.
* ``guarded_async_client()`` — an ``httpx2.AsyncClient`` (the ``mcp`` SDK's client) whose
  connection pool opens sockets only through a network backend that resolves and checks the
  host first and connects to the checked address. TLS still verifies the real host name, so
  the checked address cannot be swapped by a second DNS answer. Streaming responses (SSE) work
  because nothing is buffered here. Its signature is the ``mcp`` SDK's ``McpHttpClientFactory``.

Plain ``http`` is refused except to loopback under the test-only ``KODY_FETCH_ALLOW_LOOPBACK``;
``KODY_FETCH_CA_FILE`` (tests only) adds a trusted certificate for loopback https servers.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import httpcore2
import httpx2
import requests
from django.conf import settings
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

from kody.fetch import FetchRefused, resolve_checked
from kody.sandbox import netfetch

DEFAULT_MAX_BYTES = 1_000_000
DEFAULT_TIMEOUT = 10.0


def check_url(url: str) -> None:
    """Refuse a URL before any I/O: https only (http only to loopback in tests), no credentials.

    Address checks happen at connect time; this catches what is wrong whatever it resolves to.
    """
    parts = urlsplit(url)
    if not parts.hostname or parts.username or parts.password:
        raise FetchRefused("the URL needs a host and no credentials")
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and _loopback_allowed(parts.hostname):
        return
    raise FetchRefused(f"scheme {parts.scheme!r} is not allowed")


def _loopback_allowed(host: str) -> bool:
    if not getattr(settings, "KODY_FETCH_ALLOW_LOOPBACK", False):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class GuardedAdapter(BaseAdapter):
    """A requests transport adapter: one checked hop per ``send``; bodies capped."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES, timeout: float = DEFAULT_TIMEOUT):
        super().__init__()
        self.max_bytes = max_bytes
        self.timeout = timeout

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, timeout: Any = None, **_: Any
    ) -> requests.Response:
        url = request.url or ""
        check_url(url)
        body = request.body
        if isinstance(body, str):
            body = body.encode()
        limit = _seconds(timeout, self.timeout)
        answer = netfetch.perform(
            netfetch.Request(
                method=request.method or "GET",
                url=url,
                headers={k: _text(v) for k, v in request.headers.items()},
                body=body if isinstance(body, bytes) else None,
            ),
            max_bytes=self.max_bytes,
            timeout=limit,
            follow_redirects=False,
        )
        response = requests.Response()
        response.status_code = answer.status
        response.headers = CaseInsensitiveDict(answer.headers)
        response._content = answer.body
        response.url = answer.url
        response.request = request
        response.reason = ""
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        return response

    def close(self) -> None:
        return None


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _seconds(timeout: Any, default: float) -> float:
    if isinstance(timeout, int | float):
        return float(timeout)
    if isinstance(timeout, tuple) and timeout and all(isinstance(t, int | float) for t in timeout):
        return float(sum(timeout))
    return default


def guarded_session(
    session_class: type[requests.Session] = requests.Session,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    **kwargs: Any,
) -> Any:
    """A ``session_class(**kwargs)`` whose every request goes through ``GuardedAdapter``.

    ``guarded_session(OAuth2Session, client_id=…, …)`` gives an SSRF-safe Authlib client.
    The session ignores proxy and ``.netrc`` settings from the environment.
    """
    session = session_class(**kwargs)
    session.trust_env = False
    session.max_redirects = netfetch.MAX_REDIRECTS
    adapter = GuardedAdapter(max_bytes=max_bytes, timeout=timeout)
    session.adapters.clear()
    session.mount("", adapter)  # every scheme: check_url refuses what is not http(s)
    return session


class _CheckedBackend(httpcore2.AsyncNetworkBackend):
    """Opens TCP connections only to addresses ``resolve_checked`` approves."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await anyio.to_thread.run_sync(resolve_checked, host, port)
        except FetchRefused as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore2.ConnectError as exc:
                last = exc
        raise httpcore2.ConnectError(f"could not reach {host}: {last}")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not reachable from here")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CheckedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport with its pool on the checking backend and a scheme check per request."""

    def __init__(self) -> None:
        context = _ssl_context()
        super().__init__(verify=context, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=context, network_backend=_CheckedBackend()
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            check_url(str(request.url))
        except FetchRefused as exc:
            raise httpx2.ConnectError(str(exc), request=request) from None
        return await super().handle_async_request(request)


def _ssl_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca_file = getattr(settings, "KODY_FETCH_CA_FILE", "")
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


def guarded_async_client(
    headers: Mapping[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` for outside URLs; fits ``mcp``'s ``McpHttpClientFactory``.

    A refused URL or address surfaces as ``httpx2.ConnectError`` whose message says why.
    """
    kwargs: dict[str, Any] = {
        "transport": _CheckedTransport(),
        "timeout": timeout or httpx2.Timeout(30.0, read=300.0),
        "trust_env": False,
    }
    if headers is not None:
        kwargs["headers"] = dict(headers)
    if auth is not None:
        kwargs["auth"] = auth
    return httpx2.AsyncClient(**kwargs)
