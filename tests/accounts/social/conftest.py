"""The ``fake`` fixture: the local OAuth provider (tests/fakes) serving as GitHub and Google."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.accounts.social.support import CLIENT_ID, CLIENT_SECRET, provider_settings
from tests.fakes.oauth_provider import OAuthProviderFake


@pytest.fixture
def fake(settings: Any) -> Iterator[OAuthProviderFake]:
    with OAuthProviderFake() as provider:
        provider.add_client(CLIENT_ID, CLIENT_SECRET)
        settings.KODY_FETCH_ALLOW_LOOPBACK = True
        settings.SITE_URL = "http://testserver"
        settings.KODY_SOCIAL_PROVIDERS = provider_settings(provider)
        yield provider
