"""The shapes integration input must have; every refusal is a coded 422 naming the field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from kody.errors import InvalidInput
from kody.fetch import FetchRefused
from kody.netguard import check_url

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# Integration names end up in secret names (``integration.<name>.access_token``) and in
# /account/integrations/<name>: the literal sub-paths of that page are not names.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
RESERVED_NAMES = frozenset({"apps", "callback", "openapi", "new", "registry"})
HOST_RE = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*$"
)
SEPARATORS = (" ", ",", "+", ";")
# Authorize parameters the flow sets itself; an app's extra parameters may not replace them.
PROTECTED_PARAMS = frozenset(
    {
        "client_id",
        "redirect_uri",
        "response_type",
        "state",
        "scope",
        "code_challenge",
        "code_challenge_method",
    }
)
# Who may use a connection's tokens: "own-packages" (the default) — your own code and your own
# packages (self-authored, adopted forks) plus any package in allowedPackages; "allowed-packages"
# — only the packages in allowedPackages (not ad hoc execute, not your other packages).
USAGE_MODES = ("own-packages", "allowed-packages")
MAX_EXTRA_PARAMS = 20
MAX_SCOPES = 100
MAX_HOSTS = 20


def slug(value: Any, field: str = "appSlug") -> str:
    if not isinstance(value, str) or not SLUG_RE.match(value):
        raise InvalidInput(
            f"{field} must be 1-64 lower-case letters, digits, '-' or '_'.",
            details={"field": field},
        )
    return value


def name(value: Any) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise InvalidInput(
            "name must be 1-64 letters, digits, '-' or '_', starting with a letter or digit.",
            details={"field": "name"},
        )
    if value.lower() in RESERVED_NAMES:
        raise InvalidInput(
            f"{value!r} is reserved; choose another integration name.", details={"field": "name"}
        )
    return value


def endpoint(value: Any, field: str) -> str:
    """An OAuth endpoint URL: https (loopback http only in tests), no credentials."""
    if not isinstance(value, str) or len(value) > 2048:
        raise InvalidInput(f"{field} must be a URL.", details={"field": field})
    try:
        check_url(value)
    except FetchRefused:
        raise InvalidInput(
            f"{field} must be an https URL without credentials.", details={"field": field}
        ) from None
    if urlsplit(value).fragment:
        raise InvalidInput(f"{field} may not carry a #fragment.", details={"field": field})
    return value


def hosts(values: Any, field: str = "requiredHosts") -> list[str]:
    if not isinstance(values, list) or len(values) > MAX_HOSTS:
        raise InvalidInput(f"{field} must be a list of host names.", details={"field": field})
    cleaned = sorted({str(v).strip().lower() for v in values if isinstance(v, str)})
    if len(cleaned) != len({str(v).strip().lower() for v in values}) or not all(
        HOST_RE.match(h) for h in cleaned
    ):
        raise InvalidInput(
            f"{field} must hold bare host names (no scheme, port or path).",
            details={"field": field},
        )
    return cleaned


def scopes(values: Any, field: str = "scopes") -> list[str]:
    if not isinstance(values, list) or len(values) > MAX_SCOPES:
        raise InvalidInput(f"{field} must be a list of scopes.", details={"field": field})
    out: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value or len(value) > 200 or value != value.strip():
            raise InvalidInput(
                f"{field} holds an empty or malformed scope.", details={"field": field}
            )
        if value not in out:
            out.append(value)
    return out


def extra_params(value: Any, field: str = "extraAuthorizeParams") -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > MAX_EXTRA_PARAMS:
        raise InvalidInput(f"{field} must be an object of strings.", details={"field": field})
    out: dict[str, str] = {}
    for key, item in value.items():
        if (
            not isinstance(key, str)
            or not isinstance(item, str)
            or len(key) > 100
            or len(item) > 500
        ):
            raise InvalidInput(f"{field} must be an object of strings.", details={"field": field})
        if key in PROTECTED_PARAMS:
            raise InvalidInput(
                f"{field} may not set {key!r}: the flow sets it.", details={"field": field}
            )
        out[key] = item
    return out


def separator(value: Any) -> str:
    if value is None:
        return " "
    if value not in SEPARATORS:
        raise InvalidInput(
            f"scopeSeparator must be one of {list(SEPARATORS)}.",
            details={"field": "scopeSeparator"},
        )
    return str(value)


def exchange_style(value: Any, styles: tuple[str, ...]) -> str:
    if value is None or value == "":
        return "form"
    if value not in styles:
        raise InvalidInput(
            f"tokenExchangeStyle must be one of {list(styles)}.",
            details={"field": "tokenExchangeStyle"},
        )
    return str(value)


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def usage_mode(value: Any) -> str:
    if value not in USAGE_MODES:
        raise InvalidInput(
            "usageMode must be one of: " + ", ".join(USAGE_MODES) + ".",
            details={"field": "usageMode", "allowed": list(USAGE_MODES)},
        )
    return str(value)
