"""Helpers for driving OAuth against a live server: a signed-in browser, the SDK's provider,
and a loopback https server that serves a client ID metadata document."""

from __future__ import annotations

import datetime
import html
import ipaddress
import json
import re
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx2
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.accounts.factories import PASSWORD

T = TypeVar("T")
REDIRECT_URI = "http://127.0.0.1:53682/callback"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def signed_in(url: str, identifier: str) -> httpx2.AsyncClient:
    """A browser session: the consent page is for a signed-in person."""
    browser = httpx2.AsyncClient(base_url=url, timeout=30)
    await browser.get("/login")
    response = await browser.post(
        "/login",
        data={
            "identifier": identifier,
            "password": PASSWORD,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
    )
    assert response.status_code == 302, response.text[:500]
    return browser


class Consent:
    """The person at the consent page: records what it showed, then allows or denies."""

    def __init__(self, browser: httpx2.AsyncClient, *, allow: bool = True, remember: bool = False):
        self.browser = browser
        self.allow = allow
        self.remember = remember
        self.pages: list[str] = []
        self.authorize_urls: list[str] = []
        self.result: AuthorizationCodeResult | None = None
        self.redirect: str = ""

    async def redirect_handler(self, authorization_url: str) -> None:
        self.authorize_urls.append(authorization_url)
        page = await self.browser.get(authorization_url)
        if page.status_code == 302:  # remembered: no page at all
            self._take(page.headers["location"])
            return
        assert page.status_code == 200, page.text[:500]
        self.pages.append(page.text)
        fields = {name: html.unescape(value) for name, value in HIDDEN.findall(page.text)}
        if self.allow:
            fields["allow"] = "on"
        if self.remember:
            fields["remember"] = "on"
        answer = await self.browser.post(authorization_url, data=fields)
        assert answer.status_code == 302, answer.text[:500]
        self._take(answer.headers["location"])

    def _take(self, location: str) -> None:
        self.redirect = location
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        self.result = AuthorizationCodeResult(
            code=query.get("code", ""), state=query.get("state"), iss=query.get("iss")
        )

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def provider(
    url: str,
    consent: Consent,
    storage: MemoryStorage,
    *,
    name: str = "Test Agent",
    client_metadata_url: str | None = None,
) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=url + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=name,
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=consent.redirect_handler,
        callback_handler=consent.callback_handler,
        client_metadata_url=client_metadata_url,
    )


async def with_mcp(url: str, auth: Any, use: Callable[[ClientSession], Awaitable[T]]) -> T:
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with streamable_http_client(url + "/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await use(session)


def initialize(url: str, raw: str | None) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if raw:
        headers["Authorization"] = f"Bearer {raw}"
    return httpx2.post(url + "/mcp", json=body, headers=headers, timeout=10)


# --- a loopback https server for client ID metadata documents ------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class DocumentServer:
    """Serves ``documents[path]`` as JSON; ``redirects[path]`` answers 302 to a URL."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.redirects: dict[str, str] = {}
        self.hits: list[str] = []
        self.url = ""


@contextmanager
def document_server(cert: Path, key: Path) -> Iterator[DocumentServer]:
    state = DocumentServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            state.hits.append(self.path)
            if self.path in state.redirects:
                self.send_response(302)
                self.send_header("Location", state.redirects[self.path])
                self.end_headers()
                return
            document = state.documents.get(self.path)
            if document is None:
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.url = f"https://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
