"""Bring-your-own OAuth apps: the user's own registration at a provider.

The client id is stored inline (it is not secret); the client secret is a user secret named
``oauth-app.<slug>.client_secret`` with no allowed host, so no package can ever send it — only
Kody's own token requests read it. Replies describe an app and say whether it has a secret,
never what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from apps.packages.models import UserIntegration, UserOauthApp
from apps.packages.models.integrations import OauthFlow
from apps.packages.services import secrets
from apps.packages.services.integrations import rules
from apps.packages.services.integrations.client import EXCHANGE_STYLES, OAuthApp
from kody.errors import Conflict, InvalidInput, NotFound

log = logging.getLogger(__name__)
MAX_SECRET_CHARS = 4096


class AppNotFound(NotFound):
    code = "oauth_app_not_found"
    message = "No OAuth app with that slug."


class AppInUse(Conflict):
    code = "oauth_app_in_use"
    message = "Integrations still use this OAuth app; delete them first."


def client_secret_name(slug: str) -> str:
    return f"oauth-app.{slug}.client_secret"


def view(app: UserOauthApp) -> dict[str, Any]:
    return {
        "slug": app.slug,
        "provider": app.provider,
        "label": app.label,
        "clientId": app.client_id,
        "hasClientSecret": bool(app.client_secret_secret_name),
        "authorizeUrl": app.authorize_url,
        "tokenUrl": app.token_url,
        "apiBaseUrl": app.api_base_url or None,
        "flow": app.flow,
        "usePkce": app.use_pkce,
        "tokenExchangeStyle": app.token_exchange_style or "form",
        "scopeSeparator": app.scope_separator,
        "extraAuthorizeParams": dict(app.extra_authorize_params_json),
        "createdAt": app.created_at.isoformat(),
        "updatedAt": app.updated_at.isoformat(),
    }


def get_app(user_id: str, slug: str) -> UserOauthApp:
    app = UserOauthApp.objects.filter(user_id=user_id, slug=slug).first()
    if app is None:
        raise AppNotFound(details={"appSlug": slug})
    return app


def list_apps(user_id: str) -> list[UserOauthApp]:
    return list(UserOauthApp.objects.filter(user_id=user_id).order_by("slug"))


def _secret(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_SECRET_CHARS:
        # Never quote the value.
        raise InvalidInput(
            f"clientSecret must be a non-empty string of at most {MAX_SECRET_CHARS} characters.",
            details={"field": "clientSecret"},
        )
    return value


def save_app(user_id: str, fields: Mapping[str, Any]) -> UserOauthApp:
    """Create the app ``fields['slug']`` or replace its settings (one transaction)."""
    slug = rules.slug(fields.get("slug"))
    flow = fields.get("flow") or OauthFlow.PKCE
    if flow not in OauthFlow.values:
        raise InvalidInput("flow must be 'pkce' or 'confidential'.", details={"field": "flow"})
    client_id = fields.get("clientId")
    if not isinstance(client_id, str) or not client_id or len(client_id) > 512:
        raise InvalidInput("clientId must be a non-empty string.", details={"field": "clientId"})
    provider = str(fields.get("provider") or slug)[:128]
    api_base = fields.get("apiBaseUrl")
    values = {
        "provider": provider,
        "label": str(fields.get("label") or "")[:255],
        "client_id": client_id,
        "authorize_url": rules.endpoint(fields.get("authorizeUrl"), "authorizeUrl"),
        "token_url": rules.endpoint(fields.get("tokenUrl"), "tokenUrl"),
        "api_base_url": rules.endpoint(api_base, "apiBaseUrl") if api_base else "",
        "flow": flow,
        "use_pkce": bool(fields.get("usePkce", flow == OauthFlow.PKCE)),
        "token_exchange_style": rules.exchange_style(
            fields.get("tokenExchangeStyle"), EXCHANGE_STYLES
        ),
        "scope_separator": rules.separator(fields.get("scopeSeparator")),
        "extra_authorize_params_json": rules.extra_params(fields.get("extraAuthorizeParams")),
    }
    secret = fields.get("clientSecret")
    with transaction.atomic():
        app = UserOauthApp.objects.select_for_update().filter(user_id=user_id, slug=slug).first()
        if app is None:
            app = UserOauthApp(user_id=user_id, slug=slug)
        for key, value in values.items():
            setattr(app, key, value)
        if secret is not None:
            _seal(user_id, app, _secret(secret))
        if flow == OauthFlow.CONFIDENTIAL and not app.client_secret_secret_name:
            raise InvalidInput(
                "A confidential app needs a clientSecret.", details={"field": "clientSecret"}
            )
        app.save()
    log.info("oauth app saved: user=%s app=%s flow=%s", user_id[:8], slug, flow)
    return app


def _seal(user_id: str, app: UserOauthApp, secret: str) -> None:
    secrets.save_managed(
        user_id,
        secrets.NewSecret(
            name=client_secret_name(app.slug),
            value=secret,
            description=f"Client secret of the OAuth app {app.slug}",
            allowed_hosts=[],
        ),
    )
    app.client_secret_secret_name = client_secret_name(app.slug)


def rotate_credentials(
    user_id: str, slug: str, *, client_id: str | None, client_secret: str | None
) -> UserOauthApp:
    """Replace the app's client id and/or secret; existing connections keep their tokens."""
    if client_id is None and client_secret is None:
        raise InvalidInput(
            "Give a new clientId, a new clientSecret, or both.", details={"field": "clientSecret"}
        )
    with transaction.atomic():
        app = UserOauthApp.objects.select_for_update().filter(user_id=user_id, slug=slug).first()
        if app is None:
            raise AppNotFound(details={"appSlug": slug})
        if client_id is not None:
            if not client_id or len(client_id) > 512:
                raise InvalidInput(
                    "clientId must be a non-empty string.", details={"field": "clientId"}
                )
            app.client_id = client_id
        if client_secret is not None:
            _seal(user_id, app, _secret(client_secret))
        app.save()
    log.info("oauth app credentials rotated: user=%s app=%s", user_id[:8], slug)
    return app


def delete_app(user_id: str, slug: str) -> None:
    with transaction.atomic():
        app = get_app(user_id, slug)
        if UserIntegration.objects.filter(user_id=user_id, app_slug=slug).exists():
            raise AppInUse(details={"appSlug": slug})
        secrets.delete_managed(user_id, [client_secret_name(app.slug)])
        app.delete()


def as_oauth_app(user_id: str, app: UserOauthApp) -> OAuthApp:
    # The name derived from the slug, never the stored pointer (see tokens.read_access_token).
    name = client_secret_name(app.slug) if app.client_secret_secret_name else ""
    return OAuthApp(
        kind="user",
        slug=app.slug,
        provider=app.provider,
        client_id=app.client_id,
        authorize_url=app.authorize_url,
        token_url=app.token_url,
        flow=app.flow,
        use_pkce=app.use_pkce,
        token_exchange_style=app.token_exchange_style or "form",
        scope_separator=app.scope_separator or " ",
        extra_authorize_params=dict(app.extra_authorize_params_json),
        client_secret=(lambda: secrets.read_managed(user_id, name)) if name else (lambda: None),
    )
