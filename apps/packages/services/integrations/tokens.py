"""Where a connection's tokens live: user secrets, sealed like every other secret.

``store_tokens`` writes the access token (and the refresh token, when the provider sent one)
as user secrets named ``integration.<name>.access_token`` / ``.refresh_token`` whose
``allowed_hosts`` are the integration's required hosts, so a package reaches the provider
with ``{{secret:integration.<name>.access_token}}`` and the runtime fills it only for those
hosts. The access token's secret expires when the provider said the token does, so an expired
token is missing for use rather than sent. ``read_access_token`` is the one server-side read
for Kody's own calls to the provider (remote MCP servers reuse it); no reply, page, log line
or export ever carries a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from apps.packages.models import SecretEntry, UserIntegration
from apps.packages.services import secrets

TOKEN_SECRET_RE = re.compile(
    r"^integration\.([A-Za-z0-9][A-Za-z0-9_-]{0,63})\.(?:access|refresh)_token$"
)
EXCLUSIVE_MODE = "allowed-packages"


def access_secret_name(name: str) -> str:
    return f"integration.{name}.access_token"


def refresh_secret_name(name: str) -> str:
    return f"integration.{name}.refresh_token"


def store_tokens(
    user_id: str, integration: UserIntegration, token: Mapping[str, Any], *, refreshed: bool = False
) -> UserIntegration:
    """Seal ``token`` (an OAuth token response) for ``integration`` and record the secret
    names on it; a response without a new refresh token keeps the one already stored.
    ``connected_at`` marks the first connection, ``token_refreshed_at`` the last refresh.

    Runs in the caller's transaction; saves the integration row."""
    access = str(token.get("access_token") or "")
    if not access:
        raise ValueError("the token response has no access_token")
    hosts = list(integration.required_hosts_json)
    # The person's authorization (the callback) applies the packages the integration names; a
    # refresh keeps the grants the token secrets already carry.
    packages = None if refreshed else list(integration.allowed_packages_json)
    expires_at = _expiry(token)
    label = integration.account_label or integration.name
    secrets.save_managed(
        user_id,
        secrets.NewSecret(
            name=access_secret_name(integration.name),
            value=access,
            description=f"OAuth access token of the {label} integration",
            allowed_hosts=hosts,
            expires_at=expires_at,
        ),
        allowed_packages=packages,
    )
    integration.access_token_secret_name = access_secret_name(integration.name)
    refresh = str(token.get("refresh_token") or "")
    if refresh:
        secrets.save_managed(
            user_id,
            secrets.NewSecret(
                name=refresh_secret_name(integration.name),
                value=refresh,
                description=f"OAuth refresh token of the {label} integration",
                allowed_hosts=hosts,
            ),
            allowed_packages=packages,
        )
        integration.refresh_token_secret_name = refresh_secret_name(integration.name)
    now = timezone.now()
    if refreshed:
        integration.token_refreshed_at = now
    else:
        integration.connected_at = now
    integration.save()
    return integration


def _expiry(token: Mapping[str, Any]) -> Any:
    seconds = token.get("expires_in")
    try:
        ttl = int(seconds) if seconds is not None else None
    except (TypeError, ValueError):
        ttl = None
    return timezone.now() + timedelta(seconds=ttl) if ttl and ttl > 0 else None


def read_access_token(user_id: str, name: str) -> str | None:
    """The live access token of the user's integration ``name`` for Kody's own request to
    the provider, or None (no such integration, not connected, or expired: refresh it)."""
    row = UserIntegration.objects.filter(user_id=user_id, name=name).first()
    if row is None or not row.access_token_secret_name:
        return None
    # Always the name derived from the integration, never the stored pointer: a row (an
    # imported one, say) naming some other secret must not make Kody send that secret.
    return secrets.read_managed(user_id, access_secret_name(row.name))


def read_refresh_token(user_id: str, integration: UserIntegration) -> str | None:
    if not integration.refresh_token_secret_name:
        return None
    return secrets.read_managed(user_id, refresh_secret_name(integration.name))


def refresh_fingerprint(user_id: str, integration: UserIntegration) -> str:
    return secrets.sealed_fingerprint(user_id, refresh_secret_name(integration.name))


def _token_secrets(user_id: str, *names: str) -> QuerySet[SecretEntry]:
    """The user's own account-wide secrets of these names (where tokens are sealed)."""
    return SecretEntry.objects.filter(
        bucket__user_id=user_id, bucket__scope="user", bucket__binding_key="", name__in=names
    )


def token_state(user_id: str, integration: UserIntegration) -> tuple[str, Any]:
    """(status, access token expiry): ``pending`` before the first connection, ``connected``,
    ``expired`` (refresh it), or ``missing`` (its secret was deleted: connect again)."""
    if not integration.access_token_secret_name:
        return "pending", None
    entry = _token_secrets(user_id, access_secret_name(integration.name)).first()
    if entry is None:
        return "missing", None
    if entry.expires_at is not None and entry.expires_at <= timezone.now():
        return "expired", entry.expires_at
    return "connected", entry.expires_at


def drop_tokens(user_id: str, integration: UserIntegration) -> int:
    return secrets.delete_managed(
        user_id, [access_secret_name(integration.name), refresh_secret_name(integration.name)]
    )


def reserved_to_granted_packages(user_id: str, secret_name: str) -> bool:
    """The secrets check: True when ``secret_name`` is a token of an integration whose usage
    mode reserves it to the packages it names."""
    match = TOKEN_SECRET_RE.match(secret_name)
    if match is None:
        return False
    return UserIntegration.objects.filter(
        user_id=user_id, name=match.group(1), usage_mode=EXCLUSIVE_MODE
    ).exists()


def granted_packages(user_id: str, integration: UserIntegration) -> list[str] | None:
    """The packages the access token's secret is granted to now (None before a token)."""
    entry = _token_secrets(user_id, access_secret_name(integration.name)).first()
    return list(entry.allowed_packages) if entry is not None else None


def set_grants(user_id: str, integration: UserIntegration, packages: Sequence[str]) -> int:
    """Make both token secrets granted to exactly ``packages``; runs in the caller's
    transaction. Returns how many secrets changed."""
    wanted = sorted(set(packages))
    entries = _token_secrets(
        user_id, access_secret_name(integration.name), refresh_secret_name(integration.name)
    ).select_for_update()
    changed = 0
    for entry in entries:
        if list(entry.allowed_packages) != wanted:
            entry.allowed_packages = wanted
            entry.save(update_fields=["allowed_packages", "updated_at"])
            changed += 1
    return changed


def narrow_grants(user_id: str, integration: UserIntegration) -> int:
    """Drop from the token secrets' grants every package the integration no longer names;
    never adds one (adding is the person's, in the browser)."""
    current = granted_packages(user_id, integration)
    if current is None:
        return 0
    kept = set(current) & set(integration.allowed_packages_json)
    return set_grants(user_id, integration, sorted(kept)) if kept != set(current) else 0
