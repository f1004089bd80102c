"""Fetching a URL someone outside handed us, without letting them aim us at our own network.

Every hop — the first request and each redirect — is resolved once, and refused unless *every*
address the name resolves to is globally routable: no private, loopback, link-local (the cloud
metadata address 169.254.169.254 is link-local), carrier-grade NAT, multicast or reserved
address, and no IPv6 form that smuggles one of those in an embedded IPv4 (mapped, 6to4, Teredo,
NAT64). The connection then goes to the address that was checked, while TLS verifies the real
host name, so a second DNS answer cannot rebind it. Bodies are capped, the whole fetch shares
one deadline, and redirects are followed by hand, a few at most.

Tests serve documents from their own loopback https server: ``KODY_FETCH_ALLOW_LOOPBACK`` lets
loopback (only loopback) through and ``KODY_FETCH_CA_FILE`` trusts the test's certificate.
Neither is ever set in production.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import urllib3
from django.conf import settings

MAX_REDIRECTS = 3
REDIRECT_STATUSES = {301, 302, 303, 307, 308}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class FetchRefused(Exception):
    """The URL may not be fetched, or the fetch failed; the message is for logs, not clients."""


class ResponseTooLarge(FetchRefused):
    """The body went past ``max_bytes``; callers that answer "too large" tell it apart."""


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def is_public_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:
            return all(part.is_global for part in ip.teredo)
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    return ip.is_global


def _allowed(address: str) -> bool:
    if is_public_address(address):
        return True
    if getattr(settings, "KODY_FETCH_ALLOW_LOOPBACK", False):
        try:
            return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
        except ValueError:
            return False
    return False


def resolve_checked(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, or ``FetchRefused`` if any of them is off-limits."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchRefused(f"cannot resolve {host!r}: {exc}") from exc
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if not _allowed(address):
            # One bad answer spoils the name: a split answer must not pick the internal one.
            raise FetchRefused(f"{host!r} resolves to a non-public address ({address})")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise FetchRefused(f"{host!r} resolves to nothing")
    return addresses


def safe_get(
    url: str,
    *,
    max_bytes: int,
    timeout: float = 5.0,
    accept: str = "*/*",
    schemes: tuple[str, ...] = ("https",),
    max_redirects: int = MAX_REDIRECTS,
) -> Fetched:
    deadline = time.monotonic() + timeout
    current = url
    for _ in range(max_redirects + 1):
        response = _get_once(current, max_bytes, deadline, accept, schemes)
        location = response.headers.get("location")
        if response.status in REDIRECT_STATUSES and location:
            current = urljoin(current, location)
            continue
        return response
    raise FetchRefused(f"more than {max_redirects} redirects from {url!r}")


def _get_once(
    url: str, max_bytes: int, deadline: float, accept: str, schemes: tuple[str, ...]
) -> Fetched:
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise FetchRefused(f"scheme {parts.scheme!r} is not allowed")
    if not parts.hostname or parts.username or parts.password:
        raise FetchRefused("the URL needs a host and no credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise FetchRefused("bad port") from exc
    addresses = resolve_checked(parts.hostname, port)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Host": parts.netloc, "Accept": accept, "User-Agent": "Kody"}
    last: Exception | None = None
    for address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        pool = _pool(parts.scheme, address, port, parts.hostname, remaining)
        try:
            raw = pool.urlopen(
                "GET", path, headers=headers, redirect=False, retries=False, preload_content=False
            )
            try:
                body = raw.read(max_bytes + 1)
            finally:
                raw.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            last = exc
            continue
        finally:
            pool.close()
        if len(body) > max_bytes:
            raise ResponseTooLarge(f"the response is larger than {max_bytes} bytes")
        lowered = {key.lower(): value for key, value in raw.headers.items()}
        return Fetched(url=url, status=raw.status, body=body, headers=lowered)
    raise FetchRefused(f"could not fetch {url!r}: {last}")


def _pool(
    scheme: str, address: str, port: int, hostname: str, remaining: float
) -> urllib3.HTTPConnectionPool:
    limits = urllib3.Timeout(connect=remaining, read=remaining, total=remaining)
    if scheme == "http":
        return urllib3.HTTPConnectionPool(address, port, timeout=limits, retries=False, maxsize=1)
    context = ssl.create_default_context()
    ca_file = getattr(settings, "KODY_FETCH_CA_FILE", "")
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return urllib3.HTTPSConnectionPool(
        address,
        port,
        timeout=limits,
        retries=False,
        maxsize=1,
        ssl_context=context,
        server_hostname=hostname,
        assert_hostname=hostname,
    )
