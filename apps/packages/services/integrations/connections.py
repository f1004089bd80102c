"""Integrations (``user_integrations``): one named OAuth connection of a user to a provider,
through exactly one app — the user's own (``appSlug``) or an operator's (``platformAppSlug``).

A row is saved before the person authorizes (status ``pending``) and becomes ``connected``
when the callback stores its tokens (then ``expired`` past the token's lifetime until a
refresh, ``missing`` if the person deleted the token's secret). Replies name the token
secrets (what a package puts in ``{{secret:…}}``) and never carry a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.accounts.models import PlatformOAuthApp
from apps.packages.models import SavedPackage, UserIntegration, UserOauthApp
from apps.packages.services.integrations import oauth_apps, platform_apps, rules, tokens
from apps.packages.services.integrations.client import OAuthApp
from kody.errors import InvalidInput, NotFound

MAX_ALLOWED_PACKAGES = 100


class IntegrationNotFound(NotFound):
    code = "integration_not_found"
    message = "No integration with that name."


@dataclass(frozen=True)
class Plan:
    """What ``integrationSave`` will connect, checked before anything is written."""

    name: str
    app_slug: str | None
    platform_app: PlatformOAuthApp | None
    scopes: list[str]
    required_hosts: list[str]
    account_label: str
    description: str
    allowed_packages: list[str] | None
    usage_mode: str | None = None


def get(user_id: str, name: str) -> UserIntegration:
    row = UserIntegration.objects.filter(user_id=user_id, name=name).first()
    if row is None:
        raise IntegrationNotFound(details={"name": name})
    return row


def list_rows(user_id: str) -> list[UserIntegration]:
    return list(
        UserIntegration.objects.filter(user_id=user_id)
        .select_related("platform_app")
        .order_by("name")
    )


def view(user_id: str, row: UserIntegration) -> dict[str, Any]:
    status, expires = tokens.token_state(user_id, row)
    connected = status != "pending"
    platform = row.platform_app
    return {
        "name": row.name,
        "appSlug": row.app_slug,
        "platformAppSlug": row.platform_app_id,
        "provider": platform.provider if platform is not None else _provider(user_id, row),
        "accountLabel": row.account_label,
        "description": row.description,
        "scopes": list(row.scopes_json),
        "requiredHosts": list(row.required_hosts_json),
        "usageMode": row.usage_mode or "own-packages",
        "allowedPackages": list(row.allowed_packages_json),
        # What the token secrets are granted now: packages named through integrationSave
        # take effect when the person authorizes (or sets them on the integration's page).
        "grantedPackages": tokens.granted_packages(user_id, row) if connected else None,
        "status": status,
        "accessTokenSecret": tokens.access_secret_name(row.name) if connected else None,
        "refreshTokenSecret": tokens.refresh_secret_name(row.name)
        if row.refresh_token_secret_name
        else None,
        "placeholder": f"{{{{secret:{tokens.access_secret_name(row.name)}}}}}"
        if connected
        else None,
        "accessTokenExpiresAt": expires.isoformat() if expires else None,
        "connectedAt": row.connected_at.isoformat() if row.connected_at else None,
        "tokenRefreshedAt": row.token_refreshed_at.isoformat() if row.token_refreshed_at else None,
        "createdAt": row.created_at.isoformat(),
    }


def _provider(user_id: str, row: UserIntegration) -> str:
    app = UserOauthApp.objects.filter(user_id=user_id, slug=row.app_slug).first()
    return app.provider if app is not None else ""


def app_of(user_id: str, row: UserIntegration) -> OAuthApp:
    if row.platform_app_id:
        return platform_apps.as_oauth_app(platform_apps.get_any(row.platform_app_id))
    return oauth_apps.as_oauth_app(user_id, oauth_apps.get_app(user_id, row.app_slug or ""))


def plan(user_id: str, fields: Mapping[str, Any]) -> Plan:
    """Validate an ``integrationSave`` request against the app it names (no writes)."""
    name = rules.name(fields.get("name"))
    app_slug, platform_slug = fields.get("appSlug"), fields.get("platformAppSlug")
    if fields.get("app") is not None:
        app_slug = rules.slug(fields["app"].get("slug"), "app.slug")
    if bool(app_slug) == bool(platform_slug):
        raise InvalidInput(
            "Name exactly one app: appSlug (or app) for your own, platformAppSlug for Kody's.",
            details={"field": "appSlug"},
        )
    platform = platform_apps.get_enabled(platform_slug) if platform_slug else None
    app_row = None
    if app_slug and fields.get("app") is None:
        app_row = oauth_apps.get_app(user_id, app_slug)
    scopes = rules.scopes(fields["scopes"]) if fields.get("scopes") is not None else None
    if platform is not None:
        if scopes is None:
            scopes = list(platform.default_scopes_json)
        menu = set(platform.allowed_scopes_json)
        outside = [s for s in scopes if menu and s not in menu]
        if outside:
            raise InvalidInput(
                "These scopes are not offered by the platform app.",
                details={"field": "scopes", "scopes": outside},
            )
    hosts = fields.get("requiredHosts")
    if hosts is not None:
        required = rules.hosts(hosts)
    elif platform is not None:
        required = list(platform.required_hosts_json)
    else:
        base = (app_row.api_base_url if app_row else None) or (fields.get("app") or {}).get(
            "apiBaseUrl"
        )
        required = [rules.host_of(base)] if base else []
    if not required:
        raise InvalidInput(
            "requiredHosts must name at least one API host the token may be sent to.",
            details={"field": "requiredHosts"},
        )
    packages = fields.get("allowedPackages")
    return Plan(
        name=name,
        app_slug=app_slug or None,
        platform_app=platform,
        scopes=scopes or [],
        required_hosts=required,
        account_label=str(fields.get("accountLabel") or "")[:255],
        description=str(fields.get("description") or "")[:2000],
        allowed_packages=_owned(user_id, packages) if packages is not None else None,
        usage_mode=rules.usage_mode(fields["usageMode"])
        if fields.get("usageMode") is not None
        else None,
    )


def _owned(user_id: str, package_ids: Any) -> list[str]:
    if not isinstance(package_ids, list) or not all(isinstance(p, str) for p in package_ids):
        raise InvalidInput(
            "allowedPackages must be saved package ids.", details={"field": "allowedPackages"}
        )
    owned = set(
        SavedPackage.objects.filter(user_id=user_id, id__in=package_ids).values_list(
            "id", flat=True
        )
    )
    missing = sorted(set(package_ids) - owned)
    if missing:
        raise NotFound("No saved package with that id.", details={"packageIds": missing})
    return sorted(owned)


def write(user_id: str, planned: Plan, app_fields: Mapping[str, Any] | None) -> UserIntegration:
    """Save the app (when given inline) and the integration row, in one transaction.

    A reconnect of an existing integration keeps its tokens until the new ones arrive."""
    with transaction.atomic():
        if app_fields is not None:
            oauth_apps.save_app(user_id, app_fields)
        row = (
            UserIntegration.objects.select_for_update()
            .filter(user_id=user_id, name=planned.name)
            .first()
        )
        if row is None:
            row = UserIntegration(user_id=user_id, name=planned.name)
        row.app_slug = planned.app_slug
        row.platform_app = planned.platform_app
        row.scopes_json = planned.scopes
        row.required_hosts_json = planned.required_hosts
        row.account_label = planned.account_label or row.account_label
        row.description = planned.description or row.description
        if planned.allowed_packages is not None:
            row.allowed_packages_json = planned.allowed_packages
        if planned.usage_mode is not None:
            row.usage_mode = planned.usage_mode
        row.save()
        # A package dropped from the list loses the tokens at once; one added gets them when
        # the person authorizes at the provider (or grants it on the integration's page).
        tokens.narrow_grants(user_id, row)
    return row


def set_usage(user_id: str, name: str, usage_mode: Any, package_ids: Any) -> UserIntegration:
    """The owner, on the integration's page: who may use the tokens, applied to the token
    secrets at once."""
    mode = rules.usage_mode(usage_mode)
    packages = _owned(user_id, package_ids)
    with transaction.atomic():
        row = UserIntegration.objects.select_for_update().filter(user_id=user_id, name=name).first()
        if row is None:
            raise IntegrationNotFound(details={"name": name})
        row.usage_mode = mode
        row.allowed_packages_json = packages
        row.save(update_fields=["usage_mode", "allowed_packages_json", "updated_at"])
        tokens.set_grants(user_id, row, packages)
    return row


def delete(user_id: str, name: str) -> None:
    """The row and its token secrets go together."""
    with transaction.atomic():
        row = UserIntegration.objects.select_for_update().filter(user_id=user_id, name=name).first()
        if row is None:
            raise IntegrationNotFound(details={"name": name})
        tokens.drop_tokens(user_id, row)
        row.delete()
