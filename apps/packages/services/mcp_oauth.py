"""OAuth for remote MCP servers that ask for it, with the ``mcp`` SDK's own OAuth client.

Design note. The SDK's ``OAuthClientProvider`` runs the whole MCP authorization profile
(protected-resource metadata, authorization-server metadata with its issuer checks, dynamic
registration, PKCE, the RFC 8707 resource parameter, token refresh) inside one HTTP exchange,
waiting for a person in the middle. A web app cannot wait across two requests, so the flow is
cut where the person is needed: the first run stops once the SDK has built the authorization
URL (``AuthorizationPending`` carries it with its state and PKCE verifier, which the caller
stores sealed), and the second run, after the callback, hands the SDK that code and verifier
for the token exchange and lets it finish the original request. Every request the flow makes
goes through the same guarded client as the MCP requests themselves.

``Credentials`` is the SDK's token storage over what Kody keeps sealed per server: the client
registration and the tokens; ``changed`` says whether the run rotated anything to persist.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)


class AuthorizationPending(Exception):
    """The server needs the person to authorize Kody at ``url``."""

    def __init__(self, url: str, state: str, verifier: str) -> None:
        super().__init__("authorization needed")
        self.url, self.state, self.verifier = url, state, verifier


@dataclass
class Credentials:
    client_info: dict[str, Any] | None = None
    tokens: dict[str, Any] | None = None
    # When the access token expires (epoch seconds): the SDK keeps this only in memory, and a
    # token loaded without it would look valid forever and never be refreshed.
    expires_at: float | None = None
    # The authorization server's metadata, found by discovery: a refresh needs its token
    # endpoint, and without it the SDK would guess one on the MCP server's own origin.
    metadata: dict[str, Any] | None = None
    changed: bool = field(default=False, compare=False)

    async def get_tokens(self) -> OAuthToken | None:
        return OAuthToken.model_validate(self.tokens) if self.tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens.model_dump(mode="json", exclude_none=True)
        self.expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        self.changed = True

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if not self.client_info:
            return None
        return OAuthClientInformationFull.model_validate(self.client_info)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info.model_dump(mode="json", exclude_none=True)
        self.changed = True

    def dumps(self) -> str:
        return json.dumps(
            {
                "client_info": self.client_info,
                "tokens": self.tokens,
                "expires_at": self.expires_at,
                "metadata": self.metadata,
            }
        )

    @classmethod
    def loads(cls, text: str) -> Credentials:
        data = json.loads(text) if text else {}
        return cls(
            client_info=data.get("client_info"),
            tokens=data.get("tokens"),
            expires_at=data.get("expires_at"),
            metadata=data.get("metadata"),
        )


class KodyOAuth(OAuthClientProvider):
    """The SDK's provider, stopping for the person (no ``code``) or finishing with one."""

    def __init__(
        self,
        server_url: str,
        redirect_uri: str,
        storage: Credentials,
        *,
        code: str | None = None,
        verifier: str | None = None,
    ) -> None:
        self._captured = ""
        self._code, self._verifier = code, verifier
        self._credentials = storage
        metadata = OAuthClientMetadata(
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            client_name="Kody",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        super().__init__(
            server_url,
            metadata,
            storage,
            redirect_handler=self._capture,
            callback_handler=self._echo_state,
        )

    async def _initialize(self) -> None:
        await super()._initialize()
        # Restore what the SDK would otherwise lose between runs, so an expired token is
        # refreshed before it is sent.
        self.context.token_expiry_time = self._credentials.expires_at
        if self._credentials.metadata and self.context.oauth_metadata is None:
            self.context.oauth_metadata = OAuthMetadata.model_validate(self._credentials.metadata)

    def remember(self) -> None:
        """Keep the metadata this run discovered (called after the run, before persisting)."""
        found = self.context.oauth_metadata
        dumped = found.model_dump(mode="json", exclude_none=True) if found else None
        if dumped and dumped != self._credentials.metadata:
            self._credentials.metadata = dumped
            self._credentials.changed = True

    async def _capture(self, url: str) -> None:
        self._captured = url

    async def _echo_state(self) -> AuthorizationCodeResult:
        # Only reached when stopping: the code is a placeholder that is never exchanged.
        return AuthorizationCodeResult(code="pending", state=_state_of(self._captured))

    async def _perform_authorization(self) -> httpx2.Request:
        if self._code is not None and self._verifier is not None:
            return await self._exchange_token_authorization_code(self._code, self._verifier)
        _, verifier = await self._perform_authorization_code_grant()
        raise AuthorizationPending(self._captured, _state_of(self._captured), verifier)


def _state_of(url: str) -> str:
    return parse_qs(urlsplit(url).query).get("state", [""])[0]
