"""The fixed cast for agent-access tests: an owner, an outsider and an operator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import create_token

PASSWORD = "correct-horse-battery-staple-9"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    # Counters are keyed by stable user id, which repeats across runs of these fixtures.
    cache.delete_pattern("access-token-create:*")
    yield


@pytest.fixture
def make_user(db: None) -> Callable[..., User]:
    def make(username: str, **extra: Any) -> User:
        return User.objects.create_user(
            username=username, email=f"{username}@example.com", password=PASSWORD, **extra
        )

    return make


@pytest.fixture
def owner(make_user: Callable[..., User]) -> User:
    return make_user("owner")


@pytest.fixture
def outsider(make_user: Callable[..., User]) -> User:
    return make_user("outsider")


@pytest.fixture
def operator(make_user: Callable[..., User]) -> User:
    return make_user("operator", is_staff=True)


@pytest.fixture
def owner_token(owner: User) -> tuple[AccessToken, str]:
    return create_token(owner, "owner laptop")


@pytest.fixture
def outsider_token(outsider: User) -> tuple[AccessToken, str]:
    return create_token(outsider, "outsider laptop")


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
