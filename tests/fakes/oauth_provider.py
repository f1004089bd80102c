"""A local OAuth 2 provider speaking the real protocol, for tests of Kody as an OAuth *client*.

It serves, on a loopback port over plain http (allowed only under ``KODY_FETCH_ALLOW_LOOPBACK``):

* ``GET /.well-known/oauth-authorization-server`` — RFC 8414 metadata;
* ``POST /register`` — RFC 7591 dynamic client registration;
* ``GET /authorize`` — the authorization endpoint: it checks the client and redirect URI and
  answers the redirect a consenting person's browser would follow (``?code=…&state=…``), or
  ``error=access_denied`` while ``deny`` is set;
* ``POST /token`` — ``authorization_code`` (single-use codes, redirect URI match, PKCE S256 or
  plain check) and ``refresh_token`` (rotation: a used refresh token is dead; every use is
  counted in ``refresh_uses``), client authentication by HTTP Basic, by body, or none for
  public clients; each call is recorded in ``token_requests``;
* ``GET /userinfo`` (OpenID style), ``GET /user`` and ``GET /user/emails`` (GitHub style) —
  the signed-in identity ``user``, for a valid bearer token;
* anything under ``/api/`` — an echo of the method, path and ``Authorization`` header, each
  recorded in ``api_calls``, so a test can see which token reached which host.

Usage::

    with OAuthProviderFake() as provider:
        provider.add_client("app", "s3cret")
        ... provider.url("/authorize") ...
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit


@dataclass
class Client:
    client_id: str
    secret: str | None  # None: a public client (PKCE, no secret)
    redirect_uris: list[str] = field(default_factory=list)  # empty: any redirect URI


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    scope: str
    challenge: str
    method: str


class OAuthProviderFake:
    def __init__(self, *, access_token_ttl: int = 3600) -> None:
        self.access_token_ttl = access_token_ttl
        self.clients: dict[str, Client] = {}
        self.user: dict[str, Any] = {
            "id": 4242,
            "sub": "4242",
            "login": "octo",
            "name": "Octo Person",
            "email": "octo@example.com",
            "email_verified": True,
        }
        self.deny = False
        self.codes: dict[str, Grant] = {}
        self.access_tokens: dict[str, str] = {}  # token -> client_id
        self.refresh_tokens: dict[str, tuple[str, str]] = {}  # live token -> (client_id, scope)
        self.refresh_uses: Counter[str] = Counter()
        self.token_requests: list[dict[str, Any]] = []
        self.api_calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> OAuthProviderFake:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OAuthProviderFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the provider first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base_url + path

    # -- setup and inspection ----------------------------------------------------------------
    def add_client(
        self, client_id: str, secret: str | None = None, redirect_uris: list[str] | None = None
    ) -> Client:
        client = Client(client_id, secret, list(redirect_uris or []))
        with self.lock:
            self.clients[client_id] = client
        return client

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.base_url,
            "authorization_endpoint": self.url("/authorize"),
            "token_endpoint": self.url("/token"),
            "registration_endpoint": self.url("/register"),
            "userinfo_endpoint": self.url("/userinfo"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256", "plain"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "none",
            ],
        }

    def is_valid_access_token(self, token: str) -> bool:
        with self.lock:
            return token in self.access_tokens

    def issue_tokens(self, client_id: str, scope: str = "") -> dict[str, Any]:
        """Mint a token pair directly (as if a flow had completed)."""
        with self.lock:
            return self._mint(client_id, scope)

    def _mint(self, client_id: str, scope: str) -> dict[str, Any]:
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        self.access_tokens[access] = client_id
        self.refresh_tokens[refresh] = (client_id, scope)
        return {
            "access_token": access,
            "refresh_token": refresh,
            "token_type": "Bearer",
            "expires_in": self.access_token_ttl,
            "scope": scope,
        }


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _handler_for(provider: OAuthProviderFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        # -- plumbing -------------------------------------------------------------------------
        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _form(self) -> dict[str, str]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            if (self.headers.get("Content-Type") or "").startswith("application/json"):
                return {k: v for k, v in json.loads(raw or "{}").items()}
            return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}

        def _bearer(self) -> str | None:
            header = self.headers.get("Authorization") or ""
            if not header.lower().startswith("bearer "):
                return None
            token = header[7:].strip()
            return token if provider.is_valid_access_token(token) else None

        # -- routes ---------------------------------------------------------------------------
        def do_GET(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/.well-known/oauth-authorization-server":
                return self._json(200, provider.metadata())
            if parts.path == "/authorize":
                return self._authorize(query)
            if parts.path.startswith("/api/"):
                return self._echo()
            if parts.path in ("/userinfo", "/user", "/user/emails"):
                if self._bearer() is None:
                    return self._json(
                        401, {"error": "invalid_token"}, {"WWW-Authenticate": "Bearer"}
                    )
                user = provider.user
                if parts.path == "/user/emails":
                    return self._json(
                        200,
                        [
                            {
                                "email": user["email"],
                                "primary": True,
                                "verified": bool(user.get("email_verified")),
                            }
                        ],
                    )
                return self._json(200, user)
            return self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802
            path = urlsplit(self.path).path
            if path == "/token":
                return self._token()
            if path == "/register":
                return self._register()
            if path.startswith("/api/"):
                return self._echo()
            return self._json(404, {"error": "not_found"})

        def _echo(self) -> None:
            call = {
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("Host"),
                "authorization": self.headers.get("Authorization"),
            }
            with provider.lock:
                provider.api_calls.append(call)
            self._json(200, call)

        def _authorize(self, query: dict[str, str]) -> None:
            client = provider.clients.get(query.get("client_id", ""))
            redirect_uri = query.get("redirect_uri", "")
            if client is None or not redirect_uri:
                return self._json(400, {"error": "invalid_client"})
            if client.redirect_uris and redirect_uri not in client.redirect_uris:
                return self._json(400, {"error": "invalid_redirect_uri"})
            state = query.get("state")
            extra = {"state": state} if state is not None else {}
            sep = "&" if "?" in redirect_uri else "?"
            if query.get("response_type") != "code":
                error = {"error": "unsupported_response_type", **extra}
                return self._redirect(redirect_uri + sep + urlencode(error))
            if provider.deny:
                return self._redirect(
                    redirect_uri + sep + urlencode({"error": "access_denied", **extra})
                )
            code = "code-" + secrets.token_urlsafe(12)
            with provider.lock:
                provider.codes[code] = Grant(
                    client_id=client.client_id,
                    redirect_uri=redirect_uri,
                    scope=query.get("scope", ""),
                    challenge=query.get("code_challenge", ""),
                    method=query.get("code_challenge_method", "plain"),
                )
            self._redirect(redirect_uri + sep + urlencode({"code": code, **extra}))

        def _client_auth(self, form: dict[str, str]) -> tuple[Client | None, str]:
            header = self.headers.get("Authorization") or ""
            if header.lower().startswith("basic "):
                try:
                    raw = base64.b64decode(header[6:]).decode()
                except ValueError:
                    return None, "basic"
                client_id, _, secret = raw.partition(":")
                from urllib.parse import unquote_plus

                client_id, secret = unquote_plus(client_id), unquote_plus(secret)
                client = provider.clients.get(client_id)
                ok = client is not None and client.secret is not None and client.secret == secret
                return (client if ok else None), "basic"
            client = provider.clients.get(form.get("client_id", ""))
            if client is None:
                return None, "none"
            if client.secret is None:
                return client, "none"
            ok = form.get("client_secret") == client.secret
            return (client if ok else None), "post"

        def _token(self) -> None:
            form = self._form()
            client, style = self._client_auth(form)
            grant_type = form.get("grant_type", "")
            with provider.lock:
                provider.token_requests.append({"grant_type": grant_type, "auth": style})
            if client is None:
                return self._json(401, {"error": "invalid_client"})
            if grant_type == "authorization_code":
                with provider.lock:
                    grant = provider.codes.pop(form.get("code", ""), None)
                if grant is None or grant.client_id != client.client_id:
                    return self._json(400, {"error": "invalid_grant"})
                if grant.redirect_uri != form.get("redirect_uri"):
                    return self._json(
                        400, {"error": "invalid_grant", "error_description": "redirect_uri"}
                    )
                verifier = form.get("code_verifier", "")
                if grant.challenge:
                    expected = _s256(verifier) if grant.method == "S256" else verifier
                    if not verifier or expected != grant.challenge:
                        return self._json(
                            400, {"error": "invalid_grant", "error_description": "pkce"}
                        )
                elif client.secret is None:
                    return self._json(
                        400, {"error": "invalid_request", "error_description": "pkce required"}
                    )
                with provider.lock:
                    return self._json(200, provider._mint(client.client_id, grant.scope))
            if grant_type == "refresh_token":
                token = form.get("refresh_token", "")
                with provider.lock:
                    provider.refresh_uses[token] += 1
                    live = provider.refresh_tokens.pop(token, None)
                    if live is None or live[0] != client.client_id:
                        return self._json(400, {"error": "invalid_grant"})
                    return self._json(200, provider._mint(client.client_id, live[1]))
            return self._json(400, {"error": "unsupported_grant_type"})

        def _register(self) -> None:
            try:
                form = self._form()
            except ValueError:
                return self._json(400, {"error": "invalid_client_metadata"})
            uris = form.get("redirect_uris")
            if not isinstance(uris, list) or not uris:
                return self._json(400, {"error": "invalid_redirect_uri"})
            method = str(form.get("token_endpoint_auth_method") or "client_secret_basic")
            secret = None if method == "none" else secrets.token_urlsafe(16)
            client = provider.add_client(
                "dcr-" + secrets.token_hex(6), secret, [str(u) for u in uris]
            )
            answer: dict[str, Any] = {**form, "client_id": client.client_id}
            if secret is not None:
                answer["client_secret"] = secret
            self._json(201, answer)

    return Handler
