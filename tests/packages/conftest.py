"""Memory/value/secret tests call capabilities as the shared cast (tests/cast.py) through
``as_owner`` / ``as_outsider``: an API client holding that person's token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token
from apps.packages.services import crypto
from config.buckets import bucket_storages
from tests.fakes.oauth_provider import OAuthProviderFake
from tests.packages.oauth_flow import APP_SECRET


class Agent:
    """Calls capabilities over the REST surface as one user."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.client = APIClient()
        _, raw = create_token(user, f"{user.username} agent", enforce_rate_limit=False)
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    def raw(self, name: str, /, **arguments: Any) -> Any:
        return self.client.post(f"/api/v1/capabilities/{name}", arguments, format="json")

    def call(self, name: str, /, **arguments: Any) -> Any:
        response = self.raw(name, **arguments)
        assert response.status_code == 200, response.content
        return response.json()

    def error(self, name: str, status: int, /, **arguments: Any) -> dict[str, Any]:
        response = self.raw(name, **arguments)
        assert response.status_code == status, response.content
        return response.json()["error"]


@pytest.fixture
def as_owner(owner: User) -> Agent:
    return Agent(owner)


@pytest.fixture
def as_outsider(outsider: User) -> Agent:
    return Agent(outsider)


@pytest.fixture(autouse=True)
def _inline_actors(settings: Any) -> None:
    # Every mutation holds an account write lease in the UserMeter actor; run actor calls
    # in-process instead of on a worker.
    settings.KODY_ACTORS_INLINE = True


# --- what the integration tests share (``usefixtures("fresh_keyring", "fs_buckets")``) ------


@pytest.fixture
def fresh_keyring() -> Iterator[None]:
    """Sealed secrets under the test's own settings, not a keyring another test cached."""
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


@pytest.fixture
def fs_buckets(tmp_path: Path) -> Iterator[Path]:
    """Blob buckets on the test's temporary directory."""
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield tmp_path


@pytest.fixture
def provider(settings: Any) -> Iterator[OAuthProviderFake]:
    """A local OAuth provider on loopback (which fetches may reach only in tests), with the
    confidential client ``fake-client`` registered."""
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with OAuthProviderFake() as fake:
        fake.add_client("fake-client", APP_SECRET)
        yield fake
