"""``Authorization: Bearer <token>`` for the DRF API, resolved by ``KODY_BEARER_BACKEND``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from kody.callers import bearer_backend

REALM = "kody"


def bearer_from_header(header: str) -> str | None:
    scheme, _, credential = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return None
    return credential.strip()


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        raw = bearer_from_header(header)
        if raw is None:
            raise exceptions.AuthenticationFailed("Use the Bearer authorization scheme.")
        token = bearer_backend().authenticate_bearer(raw)
        # OAuth tokens are bound to /mcp (their audience); only unbound tokens work here.
        if token is not None and getattr(token, "audience", None) is not None:
            token = None
        if token is None:
            raise exceptions.AuthenticationFailed("The token is invalid, revoked or expired.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'Bearer realm="{REALM}"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "kody_pat_…"}
