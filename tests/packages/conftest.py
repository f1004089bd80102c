"""Memory/value/secret tests call capabilities as the shared cast (tests/cast.py) through
``as_owner`` / ``as_outsider``: an API client holding that person's token."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token


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
