"""Operator platform apps (``platform_oauth_apps``): Kody's own registrations at providers.

People see only enabled apps, and only what they need to connect: label, provider, logo,
the scope menu and the hosts a token goes to. Operators save and delete them through the
``adminPlatformOauthApp*`` capabilities (audited) or Django admin. The client secret is the
one credential kept outside ``secret_entries``: sealed inline with associated data naming
this table and slug, so no ``{{secret:…}}`` placeholder can ever name it, and read only by
``as_oauth_app`` for a token request. The logo is fitted to 256 px WebP in the
``community_assets`` bucket under a content-hashed ``platform-oauth-app-logos/{slug}/`` key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import logging
from collections.abc import Mapping
from typing import Any

from django.core.files.base import ContentFile
from django.db import transaction

from apps.accounts.models import PlatformOAuthApp
from apps.accounts.models.platform import OAuthFlow, TokenExchangeStyle
from apps.packages.models import UserIntegration
from apps.packages.services import crypto
from apps.packages.services.integrations import rules
from apps.packages.services.integrations.client import OAuthApp
from kody.blobs.buckets import bucket, purge_prefix
from kody.errors import Conflict, InvalidInput, NotFound

log = logging.getLogger(__name__)
LOGO_BUCKET = "community_assets"
LOGO_SIZE = 256
MAX_LOGO_BYTES = 2 * 1024 * 1024
MAX_LOGO_PIXELS = 4096 * 4096


class PlatformAppNotFound(NotFound):
    code = "platform_app_not_found"
    message = "No platform OAuth app with that slug."


class PlatformAppInUse(Conflict):
    code = "platform_app_in_use"
    message = "Connections still use this platform app; disable it instead."


def _aad(slug: str) -> str:
    return f"platform_oauth_apps:v1:{slug}:client_secret"


def seal_secret(slug: str, secret: str) -> str:
    key_id, sealed = crypto.seal(secret, _aad(slug))
    return f"{key_id}:{sealed}"


def _open_secret(app: PlatformOAuthApp) -> str | None:
    if not app.client_secret_encrypted:
        return None
    key_id, _, sealed = app.client_secret_encrypted.partition(":")
    return crypto.open_sealed(key_id, sealed, _aad(app.slug))


def logo_prefix(slug: str) -> str:
    return f"platform-oauth-app-logos/{slug}/"


def logo_path(app: PlatformOAuthApp) -> str | None:
    return f"/integrations/logos/{app.slug}" if app.logo_key else None


def view(app: PlatformOAuthApp) -> dict[str, Any]:
    """What a person sees of an enabled platform app."""
    return {
        "slug": app.slug,
        "provider": app.provider,
        "label": app.label or app.provider,
        "description": app.description or "",
        "logoUrl": logo_path(app),
        "flow": app.flow,
        "allowedScopes": list(app.allowed_scopes_json),
        "defaultScopes": list(app.default_scopes_json),
        "requiredHosts": list(app.required_hosts_json),
    }


def admin_view(app: PlatformOAuthApp) -> dict[str, Any]:
    return {
        **view(app),
        "enabled": app.enabled,
        "clientId": app.client_id,
        "hasClientSecret": bool(app.client_secret_encrypted),
        "authorizeUrl": app.authorize_url,
        "tokenUrl": app.token_url,
        "apiBaseUrl": app.api_base_url or None,
        "usePkce": bool(app.use_pkce),
        "tokenExchangeStyle": app.token_exchange_style or "form",
        "scopeSeparator": app.scope_separator or " ",
        "extraAuthorizeParams": dict(app.extra_authorize_params_json),
        "connections": UserIntegration.objects.filter(platform_app_id=app.slug).count(),
        "createdAt": app.created_at.isoformat(),
        "updatedAt": app.updated_at.isoformat(),
    }


def list_enabled() -> list[PlatformOAuthApp]:
    return list(PlatformOAuthApp.objects.filter(enabled=True).order_by("slug"))


def get_enabled(slug: str) -> PlatformOAuthApp:
    app = PlatformOAuthApp.objects.filter(slug=slug, enabled=True).first()
    if app is None:
        raise PlatformAppNotFound(details={"platformAppSlug": slug})
    return app


def get_any(slug: str) -> PlatformOAuthApp:
    app = PlatformOAuthApp.objects.filter(slug=slug).first()
    if app is None:
        raise PlatformAppNotFound(details={"slug": slug})
    return app


def list_all() -> list[PlatformOAuthApp]:
    return list(PlatformOAuthApp.objects.order_by("slug"))


def save(fields: Mapping[str, Any]) -> PlatformOAuthApp:
    """Create or update the platform app ``fields['slug']`` (the operator's capability)."""
    slug = rules.slug(fields.get("slug"), "slug")
    with transaction.atomic():
        app = PlatformOAuthApp.objects.select_for_update().filter(slug=slug).first()
        creating = app is None
        if app is None:
            app = PlatformOAuthApp(slug=slug)
        _apply(app, fields, creating)
        secret = fields.get("clientSecret")
        if secret is not None:
            if not isinstance(secret, str) or not secret or len(secret) > 4096:
                raise InvalidInput(
                    "clientSecret must be a non-empty string.", details={"field": "clientSecret"}
                )
            app.client_secret_encrypted = seal_secret(slug, secret)
        if app.flow == OAuthFlow.CONFIDENTIAL and not app.client_secret_encrypted:
            raise InvalidInput(
                "A confidential app needs a clientSecret.", details={"field": "clientSecret"}
            )
        app.save()
        if fields.get("logo") is not None:
            _store_logo(app, fields["logo"])
    log.info("platform oauth app saved: slug=%s created=%s", slug, creating)
    return app


def _apply(app: PlatformOAuthApp, fields: Mapping[str, Any], creating: bool) -> None:
    required = ("provider", "clientId", "authorizeUrl", "tokenUrl", "flow")
    missing = [f for f in required if creating and fields.get(f) in (None, "")]
    if missing:
        raise InvalidInput(
            f"A new platform app needs {', '.join(missing)}.", details={"fields": missing}
        )
    if "provider" in fields:
        app.provider = str(fields["provider"])[:64]
    if "label" in fields:
        app.label = str(fields["label"] or "")[:255] or None
    if "description" in fields:
        app.description = str(fields["description"] or "")[:2000] or None
    if "clientId" in fields:
        app.client_id = str(fields["clientId"])[:512]
    if "authorizeUrl" in fields:
        app.authorize_url = rules.endpoint(fields["authorizeUrl"], "authorizeUrl")
    if "tokenUrl" in fields:
        app.token_url = rules.endpoint(fields["tokenUrl"], "tokenUrl")
    if "apiBaseUrl" in fields:
        base = fields["apiBaseUrl"]
        app.api_base_url = rules.endpoint(base, "apiBaseUrl") if base else None
    if "flow" in fields:
        if fields["flow"] not in OAuthFlow.values:
            raise InvalidInput("flow must be 'pkce' or 'confidential'.", details={"field": "flow"})
        app.flow = fields["flow"]
    if "usePkce" in fields:
        app.use_pkce = bool(fields["usePkce"])
    if "tokenExchangeStyle" in fields:
        app.token_exchange_style = rules.exchange_style(
            fields["tokenExchangeStyle"], tuple(TokenExchangeStyle.values)
        )
    if "scopeSeparator" in fields:
        app.scope_separator = rules.separator(fields["scopeSeparator"])
    if "extraAuthorizeParams" in fields:
        app.extra_authorize_params_json = rules.extra_params(fields["extraAuthorizeParams"])
    if "allowedScopes" in fields:
        app.allowed_scopes_json = rules.scopes(fields["allowedScopes"], "allowedScopes")
    if "defaultScopes" in fields:
        app.default_scopes_json = rules.scopes(fields["defaultScopes"], "defaultScopes")
    if "requiredHosts" in fields:
        app.required_hosts_json = rules.hosts(fields["requiredHosts"])
    if "enabled" in fields:
        app.enabled = bool(fields["enabled"])


def delete(slug: str) -> None:
    with transaction.atomic():
        app = get_any(slug)
        if UserIntegration.objects.filter(platform_app_id=slug).exists():
            raise PlatformAppInUse(details={"slug": slug})
        app.delete()
    purge_prefix(LOGO_BUCKET, logo_prefix(slug))


def _fit(data: bytes) -> bytes | None:
    from PIL import Image  # Pillow is heavy; only logo uploads need it

    Image.MAX_IMAGE_PIXELS = MAX_LOGO_PIXELS
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format not in ("PNG", "JPEG", "WEBP"):
                return None
            image.load()
            frame = image.convert("RGBA")
    except (OSError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        return None
    frame.thumbnail((LOGO_SIZE, LOGO_SIZE))
    out = io.BytesIO()
    frame.save(out, "WEBP", quality=85)
    return out.getvalue()


def _store_logo(app: PlatformOAuthApp, encoded: Any) -> None:
    """``encoded`` is base64 PNG/JPEG/WebP bytes, or '' to remove the logo."""
    if encoded == "":
        purge_prefix(LOGO_BUCKET, logo_prefix(app.slug))
        app.logo_key = app.logo_content_type = None
        app.save(update_fields=["logo_key", "logo_content_type", "updated_at"])
        return
    try:
        raw = base64.b64decode(str(encoded), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("logo must be base64 image bytes.", details={"field": "logo"}) from None
    app.logo_key = store_image(logo_prefix(app.slug), raw)
    app.logo_content_type = "image/webp"
    app.save(update_fields=["logo_key", "logo_content_type", "updated_at"])


def mark_prefix(slug: str) -> str:
    return f"platform-provider-marks/{slug}/"


def store_image(prefix: str, raw: bytes) -> str:
    """Fit ``raw`` to a 256 px WebP under ``prefix`` (replacing what was there); its key."""
    fitted = _fit(raw) if len(raw) <= MAX_LOGO_BYTES else None
    if fitted is None:
        raise InvalidInput(
            f"logo must be a PNG, JPEG or WebP image of at most {MAX_LOGO_BYTES} bytes.",
            details={"field": "logo"},
        )
    key = f"{prefix}{hashlib.sha256(fitted).hexdigest()[:32]}.webp"
    purge_prefix(LOGO_BUCKET, prefix)
    bucket(LOGO_BUCKET).save(key, ContentFile(fitted))
    return key


def read_logo(slug: str) -> bytes | None:
    app = PlatformOAuthApp.objects.filter(slug=slug, enabled=True).first()
    if app is None or not app.logo_key:
        return None
    try:
        with bucket(LOGO_BUCKET).open(app.logo_key, "rb") as handle:
            data: bytes = handle.read()
    except FileNotFoundError:
        return None
    return data


def as_oauth_app(app: PlatformOAuthApp) -> OAuthApp:
    return OAuthApp(
        kind="platform",
        slug=app.slug,
        provider=app.provider,
        client_id=app.client_id,
        authorize_url=app.authorize_url,
        token_url=app.token_url,
        flow=app.flow,
        use_pkce=bool(app.use_pkce),
        token_exchange_style=app.token_exchange_style or "form",
        scope_separator=app.scope_separator or " ",
        extra_authorize_params=dict(app.extra_authorize_params_json),
        client_secret=lambda: _open_secret(app),
    )
