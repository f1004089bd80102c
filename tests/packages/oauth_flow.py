"""Helpers for integration tests: drive the authorization-code flow as a browser would.

The provider is ``tests.fakes.oauth_provider.OAuthProviderFake`` on loopback (reachable only
because the ``provider`` fixture sets ``KODY_FETCH_ALLOW_LOOPBACK``). ``authorize`` follows the
authorize URL Kody handed out to the provider's redirect, and ``callback`` delivers that
redirect to Kody's callback page as the signed-in person.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from django.test import Client

from tests.fakes.oauth_provider import OAuthProviderFake

APP_SECRET = "cs-Hq2-CLIENT-SECRET-never-shown"


def byo_app(provider: OAuthProviderFake, slug: str = "fake", **overrides: Any) -> dict[str, Any]:
    app = {
        "slug": slug,
        "provider": "fake",
        "clientId": f"{slug}-client",
        "clientSecret": APP_SECRET,
        "authorizeUrl": provider.url("/authorize"),
        "tokenUrl": provider.url("/token"),
        "apiBaseUrl": provider.url("/api"),
        "flow": "confidential",
    }
    app.update(overrides)
    if app.get("clientSecret") is None:
        app.pop("clientSecret")
    return app


def authorize(authorize_url: str) -> str:
    """The provider's redirect back to Kody (path and query), as the browser gets it."""
    answer = requests.get(authorize_url, allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["Location"])
    return f"{location.path}?{location.query}"


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def callback(client: Client, back: str) -> Any:
    return client.get(back)


def connect(agent: Any, client: Client, **save: Any) -> dict[str, Any]:
    """integrationSave, the provider's consent, and the callback: the connected integration."""
    started = agent.call("integrationSave", **save)
    response = callback(client, authorize(started["authorizeUrl"]))
    assert response.status_code == 302, response.content
    return agent.call("integrationGet", name=save["name"])["integration"]
