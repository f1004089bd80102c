"""The curated registry of known providers (``integration_providers``), and discovery.

``search`` matches enabled registry rows by slug, label, alias or description. ``discover``
answers for one provider name, host or URL: the registry row that knows it (slug, alias,
authorize/API host) and, for a URL, the provider's own RFC 8414 authorization-server
metadata (or OpenID configuration), fetched through the SSRF guard. Either way the reply is
a ready ``app`` draft for ``integrationSave``. Brand marks come from
``platform_provider_marks`` (uploaded by operators) by the row's ``mark_slug`` or slug.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import requests
from django.db.models import Q

from apps.accounts.models import PlatformProviderMark
from apps.packages.models import IntegrationProvider
from apps.packages.services.integrations import rules
from kody.errors import InvalidInput
from kody.fetch import FetchRefused
from kody.netguard import guarded_session

METADATA_PATHS = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
METADATA_MAX_BYTES = 128_000
METADATA_TIMEOUT_SECONDS = 8.0
MAX_RESULTS = 25


def mark_path(slug: str) -> str:
    return f"/integrations/marks/{slug}"


def _marks(slugs: set[str]) -> dict[str, PlatformProviderMark]:
    marks = PlatformProviderMark.objects.filter(slug__in=slugs)
    return {m.slug: m for m in marks}


def view(row: IntegrationProvider, marks: dict[str, PlatformProviderMark]) -> dict[str, Any]:
    mark = marks.get(row.mark_slug or row.slug)
    return {
        "slug": row.slug,
        "label": row.label,
        "description": row.description,
        "docsUrl": row.docs_url or None,
        "logoUrl": mark_path(mark.slug) if mark is not None and mark.logo_key else None,
        "requiredHosts": list(row.required_hosts_json),
        "defaultScopes": list(row.default_scopes_json),
        "app": {
            "slug": row.slug,
            "provider": row.slug,
            "label": row.label,
            "authorizeUrl": row.authorize_url,
            "tokenUrl": row.token_url,
            "apiBaseUrl": row.api_base_url or None,
            "flow": row.flow,
            "tokenExchangeStyle": row.token_exchange_style or "form",
            "scopeSeparator": row.scope_separator or " ",
            "extraAuthorizeParams": dict(row.extra_authorize_params_json),
        },
    }


def _views(rows: list[IntegrationProvider]) -> list[dict[str, Any]]:
    marks = _marks({r.mark_slug or r.slug for r in rows})
    return [view(r, marks) for r in rows]


def search(query: str, limit: int = MAX_RESULTS) -> list[dict[str, Any]]:
    rows = IntegrationProvider.objects.filter(enabled=True)
    text = query.strip().lower()
    if text:
        rows = rows.filter(
            Q(slug__icontains=text)
            | Q(label__icontains=text)
            | Q(description__icontains=text)
            | Q(aliases_json__icontains=text)
        )
    return _views(list(rows.order_by("slug")[:limit]))


def known(needle: str) -> IntegrationProvider | None:
    """The enabled registry row whose slug, alias, or authorize/token/API host is ``needle``."""
    needle = needle.strip().lower()
    if not needle:
        return None
    for row in IntegrationProvider.objects.filter(enabled=True).order_by("slug"):
        names = {row.slug, *(a.lower() for a in row.aliases_json)}
        names |= {
            rules.host_of(u) for u in (row.authorize_url, row.token_url, row.api_base_url) if u
        }
        names |= set(row.required_hosts_json)
        if needle in names:
            return row
    return None


def discover(target: str) -> dict[str, Any]:
    target = target.strip()
    is_url = "://" in target
    host = rules.host_of(target) if is_url else target.lower()
    row = known(host) or (known(target) if not is_url else None)
    reply: dict[str, Any] = {
        "query": target,
        "provider": _views([row])[0] if row is not None else None,
        "metadata": None,
    }
    if is_url:
        rules.endpoint(target, "url")
        reply["metadata"] = _metadata(target)
    draft = _draft(reply)
    reply["app"] = draft
    reply["found"] = draft is not None
    return reply


def _metadata(url: str) -> dict[str, Any] | None:
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    session = guarded_session(max_bytes=METADATA_MAX_BYTES, timeout=METADATA_TIMEOUT_SECONDS)
    for path in METADATA_PATHS:
        try:
            response = session.get(origin + path, headers={"Accept": "application/json"})
        except (FetchRefused, requests.RequestException):
            raise InvalidInput(
                "That URL may not be reached from Kody.", details={"field": "url"}
            ) from None
        if response.status_code != 200:
            continue
        try:
            document = json.loads(response.content)
        except ValueError:
            continue
        if isinstance(document, dict) and document.get("authorization_endpoint"):
            return _summary(document)
    return None


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    def strings(key: str) -> list[str]:
        value = doc.get(key)
        return [str(v) for v in value][:100] if isinstance(value, list) else []

    return {
        "issuer": str(doc.get("issuer") or "") or None,
        "authorizeUrl": str(doc.get("authorization_endpoint")),
        "tokenUrl": str(doc.get("token_endpoint") or "") or None,
        "registrationUrl": str(doc.get("registration_endpoint") or "") or None,
        "scopesSupported": strings("scopes_supported"),
        "codeChallengeMethods": strings("code_challenge_methods_supported"),
        "tokenEndpointAuthMethods": strings("token_endpoint_auth_methods_supported"),
    }


def _draft(reply: dict[str, Any]) -> dict[str, Any] | None:
    provider, meta = reply["provider"], reply["metadata"]
    if provider is not None:
        return dict(provider["app"])
    if meta is None or not meta.get("tokenUrl"):
        return None
    methods = meta["tokenEndpointAuthMethods"]
    pkce = "S256" in meta["codeChallengeMethods"]
    slug = rules.host_of(meta["authorizeUrl"]).replace(".", "-")[:64] or "provider"
    return {
        "slug": slug,
        "provider": slug,
        "authorizeUrl": meta["authorizeUrl"],
        "tokenUrl": meta["tokenUrl"],
        "flow": "pkce" if pkce else "confidential",
        "tokenExchangeStyle": "basic-form"
        if "client_secret_basic" in methods and "client_secret_post" not in methods
        else "form",
        "scopeSeparator": " ",
    }
