"""The request sandboxed code's ``fetch`` becomes on the host.

Every hop — the first request and each redirect — is resolved and checked by
``kody.fetch.resolve_checked`` (the one SSRF check: every address must be globally routable),
and the connection goes to the address that was checked. Unlike ``kody.fetch.safe_get`` this
carries a method, headers and a body, and allows plain http (agents call http APIs too).
Headers the caller marked as secret-bearing are dropped when a redirect leaves the host they
were granted for. The response is bounded in bytes and the whole fetch in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import urllib3

from kody.fetch import REDIRECT_STATUSES, FetchRefused, resolve_checked

MAX_REDIRECTS = 5
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
DROPPED_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding"})


@dataclass
class Request:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    secret_headers: frozenset[str] = frozenset()  # lower-case names carrying a secret
    secret_host: str = ""  # the host those secrets were granted for


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    headers: dict[str, str]
    body: bytes


def perform(
    request: Request,
    *,
    max_bytes: int,
    timeout: float,
    resolve: Callable[[str, int], list[str]] = resolve_checked,
    follow_redirects: bool = True,
) -> Response:
    """Send ``request``; with ``follow_redirects=False`` a 3xx is answered as it came."""
    method = request.method.upper()
    if method not in METHODS:
        raise FetchRefused(f"method {method!r} is not allowed")
    deadline = time.monotonic() + timeout
    url, headers, body = request.url, dict(request.headers), request.body
    for _ in range(MAX_REDIRECTS + 1):
        response = _once(method, url, headers, body, max_bytes, deadline, resolve)
        location = response.headers.get("location")
        if not follow_redirects or response.status not in REDIRECT_STATUSES or not location:
            return response
        url = urljoin(url, location)
        if response.status == 303 or (response.status in (301, 302) and method == "POST"):
            method, body = "GET", None
        if (urlsplit(url).hostname or "").lower() != request.secret_host:
            headers = {k: v for k, v in headers.items() if k.lower() not in request.secret_headers}
            if request.secret_headers:
                body = None if method == "GET" else body
    raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")


def _once(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None,
    max_bytes: int,
    deadline: float,
    resolve: Callable[[str, int], list[str]],
) -> Response:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchRefused(f"scheme {parts.scheme!r} is not allowed")
    if not parts.hostname or parts.username or parts.password:
        raise FetchRefused("the URL needs a host and no credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise FetchRefused("bad port") from exc
    addresses = resolve(parts.hostname, port)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sent = {k: v for k, v in headers.items() if k.lower() not in DROPPED_HEADERS}
    sent["Host"] = parts.netloc
    sent.setdefault("User-Agent", "Kody")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchRefused("the fetch ran out of time")
    limits = urllib3.Timeout(connect=remaining, read=remaining, total=remaining)
    if parts.scheme == "http":
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPConnectionPool(
            addresses[0], port, timeout=limits, retries=False, maxsize=1
        )
    else:
        pool = urllib3.HTTPSConnectionPool(
            addresses[0],
            port,
            timeout=limits,
            retries=False,
            maxsize=1,
            server_hostname=parts.hostname,
            assert_hostname=parts.hostname,
        )
    try:
        raw = pool.urlopen(
            method,
            path,
            body=body,
            headers=sent,
            redirect=False,
            retries=False,
            preload_content=False,
        )
        try:
            data = raw.read(max_bytes + 1)
        finally:
            raw.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        # The message names the host only: the URL may carry a substituted secret.
        raise FetchRefused(f"could not reach {parts.hostname}: {type(exc).__name__}") from None
    finally:
        pool.close()
    if len(data) > max_bytes:
        raise FetchRefused(f"the response is larger than {max_bytes} bytes")
    lowered = {key.lower(): value for key, value in raw.headers.items()}
    return Response(url=url, status=raw.status, headers=lowered, body=data)
