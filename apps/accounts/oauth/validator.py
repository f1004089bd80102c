"""The toolkit's request validator, with what Kody adds on top.

* **Audience.** Every token is bound to this server's ``/mcp`` resource (RFC 8707): a request
  that names no resource gets ``/mcp``; one that names any other resource is refused with
  ``invalid_target``, so nothing this server issues can be replayed at another resource.
* **One bearer path.** Each access token the toolkit saves gets its row in ``access_tokens``
  (``kind='oauth'``) in the same transaction, so ``/mcp`` resolves OAuth tokens and personal
  access tokens through the same bearer check, scopes, metering and write guard.
* **The reuse window without plaintext.** Tokens are stored as checksums only
  (``COMPLIANT_BCP_RFC9700_TOKEN_STORAGE``). The toolkit's grace period answers a reused refresh
  token with the pair it already issued, which it would have to read back in plaintext. Here a
  just-rotated refresh token presented again inside the window gets a *sibling* pair in the
  same family instead: two hosts sharing one client each hold a working token, neither
  invalidates the other, and a reuse after the window still revokes the whole family
  (``REFRESH_TOKEN_REUSE_PROTECTION``).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from oauth2_provider.exceptions import FatalClientError
from oauth2_provider.models import AccessToken as ToolkitAccessToken
from oauth2_provider.models import RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from apps.accounts.models import AccessToken, TokenKind

ACCESS_PREFIX = "kody_oat_"
REFRESH_PREFIX = "kody_ort_"
DISPLAY_CHARS = 4


def new_access_token(request: Any = None) -> str:
    return ACCESS_PREFIX + secrets.token_urlsafe(32)


def new_refresh_token(request: Any = None) -> str:
    return REFRESH_PREFIX + secrets.token_urlsafe(32)


def mcp_resource() -> str:
    """The resource identifier (and audience) of ``/mcp`` on this site."""
    return settings.SITE_URL.rstrip("/") + "/mcp"


def same_resource(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def foreign_resources(resources: list[str] | None) -> list[str]:
    ours = mcp_resource()
    return [r for r in resources or [] if not same_resource(r, ours)]


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def secure_or_loopback(redirect_uri: str) -> bool:
    """OAuth 2.1: a redirect URI is https, or http only to the loopback interface (a native
    client's local listener, RFC 8252 §7.3). http is in the toolkit's allowed schemes for
    that case alone; any other http redirect would carry the code in the clear."""
    parts = urlsplit(redirect_uri or "")
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


class KodyOAuth2Validator(OAuth2Validator):
    def validate_redirect_uri(
        self, client_id: str, redirect_uri: str, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not secure_or_loopback(redirect_uri):
            return False
        valid = super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)
        return bool(valid)

    def _check_and_set_request_resource(self, request: Any) -> None:
        super()._check_and_set_request_resource(request)
        if not request.resource:
            request.resource = [mcp_resource()]
        foreign = foreign_resources(request.resource)
        if foreign:
            raise errors.CustomOAuth2Error(
                error="invalid_target",
                description=f"This server issues tokens only for {mcp_resource()}.",
                request=request,
            )

    def _create_access_token(
        self, expires: Any, request: Any, token: dict[str, Any], source_refresh_token: Any = None
    ) -> ToolkitAccessToken:
        toolkit_token = super()._create_access_token(expires, request, token, source_refresh_token)
        raw = token["access_token"]
        application = request.client
        AccessToken.objects.create(
            user=request.user,
            kind=TokenKind.OAUTH,
            name=(application.name or "OAuth client")[:100],
            token_prefix=raw[: len(ACCESS_PREFIX) + DISPLAY_CHARS],
            token_hash=hashlib.sha256(raw.encode()).hexdigest(),
            client_id=application.client_id,
            scopes=str(token["scope"]).split(),
            expires_at=expires,
            oauth_token=toolkit_token,
            audience=list(toolkit_token.resource or [mcp_resource()]),
        )
        return toolkit_token

    def save_bearer_token(
        self, token: dict[str, Any], request: Any, *args: Any, **kwargs: Any
    ) -> None:
        previous = getattr(request, "refresh_token_instance", None)
        if not token.get("refresh_token") or not isinstance(previous, RefreshToken):
            with transaction.atomic():
                super().save_bearer_token(token, request, *args, **kwargs)
            return
        with transaction.atomic():
            self._rotate(token, request, previous)

    def _rotate(self, token: dict[str, Any], request: Any, previous: RefreshToken) -> None:
        if "scope" not in token:
            raise FatalClientError("Failed to renew access token: missing scope")
        self._check_and_set_request_resource(request)
        lifetime = token.get("expires_in", settings.KODY_OAUTH_ACCESS_TOKEN_SECONDS)
        expires = timezone.now() + timedelta(seconds=lifetime)
        # Lock the presented token: two refreshes with it serialize here.
        current = RefreshToken.objects.select_for_update().get(pk=previous.pk)
        request.refresh_token_instance = current
        if current.revoked is None:
            current.revoke()  # also deletes the access token it was paired with
            source = current
        else:
            # Rotated moments ago by a sibling host (validate_refresh_token has checked the
            # window): a fresh pair in the same family. The first successor keeps the
            # one-to-one source link, which is what marks ``current`` as superseded.
            window = timedelta(seconds=settings.KODY_OAUTH_REFRESH_REUSE_SECONDS)
            if current.revoked <= timezone.now() - window:
                RefreshToken.revoke_family(current.token_family)
                raise errors.InvalidGrantError(request=request)
            source = None
        access = self._create_access_token(expires, request, token, source_refresh_token=source)
        self._create_refresh_token(request, token["refresh_token"], access, current)
