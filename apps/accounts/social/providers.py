"""Configured social sign-in providers and how each one's profile is read.

A provider is offered only when its client id and secret are both set
(``settings.KODY_SOCIAL_PROVIDERS``). Everything a provider answers is treated as hostile:
ids, emails and names are checked and bounded before use, and only an email the provider says
is verified is ever returned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from apps.accounts.models.users import normalize_email
from kody.errors import KodyError, NotFound
from kody.fetch import FetchRefused

logger = logging.getLogger(__name__)


class ProviderUnavailable(KodyError):
    code = "provider_unavailable"
    status = 502
    message = "We could not complete the sign-in with the provider. Try again in a moment."


@dataclass(frozen=True)
class Provider:
    name: str
    label: str
    client_id: str
    client_secret: str
    authorize_url: str
    token_url: str
    scope: str
    api_url: str = ""
    userinfo_url: str = ""


@dataclass(frozen=True)
class Profile:
    """Who the provider says signed in. ``email`` is set only when the provider vouches for it."""

    provider: str
    provider_id: str
    email: str | None
    display_name: str
    login: str


def configured() -> dict[str, Provider]:
    found = {}
    for name, conf in getattr(settings, "KODY_SOCIAL_PROVIDERS", {}).items():
        if name in READERS and conf.get("client_id") and conf.get("client_secret"):
            fields = {key: conf.get(key, "") for key in Provider.__dataclass_fields__}
            found[name] = Provider(**{**fields, "name": name, "label": conf.get("label", name)})
    return found


def get(name: str) -> Provider:
    provider = configured().get(name)
    if provider is None:
        raise NotFound("No such sign-in provider.")
    return provider


def read_profile(provider: Provider, session: requests.Session) -> Profile:
    return READERS[provider.name](provider, session)


# --- readers ----------------------------------------------------------------------------------

MAX_NAME = 255


def _json(session: requests.Session, url: str, accept: str = "application/json") -> Any:
    try:
        response = session.get(url, headers={"Accept": accept}, timeout=10)
    except (FetchRefused, requests.RequestException, OSError) as exc:
        logger.warning("social sign-in: profile call failed: %s: %s", type(exc).__name__, exc)
        raise ProviderUnavailable(details={"reason": type(exc).__name__}) from exc
    if response.status_code != 200:
        logger.warning("social sign-in: profile call answered %s", response.status_code)
        raise ProviderUnavailable(details={"status": response.status_code})
    try:
        return response.json()
    except ValueError as exc:
        raise ProviderUnavailable(details={"reason": "not_json"}) from exc


def _text(value: Any, limit: int = MAX_NAME) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _provider_id(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ProviderUnavailable(details={"reason": "no_user_id"})
    text = str(value).strip()
    if not text or len(text) > MAX_NAME:
        raise ProviderUnavailable(details={"reason": "bad_user_id"})
    return text


def _email(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > 320:
        return None
    email = normalize_email(value)
    try:
        validate_email(email)
    except ValidationError:
        return None
    return email


def _github(provider: Provider, session: requests.Session) -> Profile:
    base = provider.api_url.rstrip("/")
    user = _json(session, f"{base}/user", "application/vnd.github+json")
    if not isinstance(user, dict):
        raise ProviderUnavailable(details={"reason": "bad_user"})
    emails = _json(session, f"{base}/user/emails", "application/vnd.github+json")
    verified = [
        row for row in (emails if isinstance(emails, list) else []) if isinstance(row, dict)
    ]
    verified = [row for row in verified if row.get("verified") is True and _email(row.get("email"))]
    # The primary address when GitHub has verified it, else the first verified one.
    verified.sort(key=lambda row: row.get("primary") is not True)
    login = _text(user.get("login"))
    return Profile(
        provider=provider.name,
        provider_id=_provider_id(user.get("id")),
        email=_email(verified[0]["email"]) if verified else None,
        display_name=_text(user.get("name")) or login,
        login=login,
    )


def _google(provider: Provider, session: requests.Session) -> Profile:
    info = _json(session, provider.userinfo_url)
    if not isinstance(info, dict):
        raise ProviderUnavailable(details={"reason": "bad_userinfo"})
    # OpenID Connect says boolean; some answers carry the string "true".
    verified = info.get("email_verified") in (True, "true")
    email = _email(info.get("email")) if verified else None
    return Profile(
        provider=provider.name,
        provider_id=_provider_id(info.get("sub")),
        email=email,
        display_name=_text(info.get("name")) or (email or ""),
        login=(email or "").split("@", 1)[0],
    )


READERS = {"github": _github, "google": _google}
