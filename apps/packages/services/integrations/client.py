"""One OAuth app, whichever kind, and the Authlib client that speaks to it.

A connection runs against either the user's own app (``user_oauth_apps``, client secret in a
user secret) or an operator's platform app (``platform_oauth_apps``, client secret sealed
inline). ``OAuthApp`` is what the flow needs from either. ``session_for`` builds Authlib's
``OAuth2Session`` on ``kody.netguard.guarded_session``: the token URL is user-supplied, so
every request to it (and every redirect hop) goes through the SSRF check.

Token exchange styles: ``form`` (client_secret_post: id and secret in the form body),
``basic-form`` (client_secret_basic: HTTP Basic, form body) and ``basic-json`` (HTTP Basic,
JSON body). A PKCE app without a client secret authenticates with its client id alone.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote

from authlib.integrations.requests_client import OAuth2Session

from kody.netguard import guarded_session

EXCHANGE_STYLES = ("form", "basic-form", "basic-json")
TOKEN_TIMEOUT_SECONDS = 10.0
TOKEN_MAX_BYTES = 256_000
BASIC_JSON = "client_secret_basic_json"


@dataclass(frozen=True)
class OAuthApp:
    kind: str  # "user" | "platform"
    slug: str
    provider: str
    client_id: str
    authorize_url: str
    token_url: str
    flow: str  # "pkce" | "confidential"
    use_pkce: bool
    token_exchange_style: str
    scope_separator: str
    extra_authorize_params: dict[str, str] = field(default_factory=dict)
    # Read only when a token request is made; never kept on a reply.
    client_secret: Callable[[], str | None] = field(default=lambda: None, repr=False)

    @property
    def pkce(self) -> bool:
        return self.flow == "pkce" or self.use_pkce

    def scope_text(self, scopes: list[str]) -> str | None:
        return (self.scope_separator or " ").join(scopes) if scopes else None


def _auth_method(app: OAuthApp, secret: str | None) -> str:
    if not secret:
        return "none"
    style = app.token_exchange_style or "form"
    if style == "basic-json":
        return BASIC_JSON
    return "client_secret_basic" if style == "basic-form" else "client_secret_post"


def _basic_json(auth: Any, method: str, uri: str, headers: Any, body: str | bytes) -> Any:
    """HTTP Basic client authentication with the token request's fields as a JSON body."""
    pair = f"{quote(auth.client_id, safe='')}:{quote(auth.client_secret or '', safe='')}"
    text = body.decode() if isinstance(body, bytes) else body or ""
    headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    headers["Content-Type"] = "application/json"
    return uri, headers, json.dumps(dict(parse_qsl(text, keep_blank_values=True)))


def session_for(app: OAuthApp, *, redirect_uri: str | None = None, scope: str | None = None) -> Any:
    """An Authlib client for ``app`` whose every request passes the SSRF guard."""
    secret = app.client_secret()
    method = _auth_method(app, secret)
    session = guarded_session(
        OAuth2Session,
        max_bytes=TOKEN_MAX_BYTES,
        timeout=TOKEN_TIMEOUT_SECONDS,
        client_id=app.client_id,
        client_secret=secret,
        token_endpoint_auth_method=method,
        redirect_uri=redirect_uri,
        scope=scope,
        code_challenge_method="S256" if app.pkce else None,
    )
    if method == BASIC_JSON:
        session.register_client_auth_method((BASIC_JSON, _basic_json))
    return session
