"""The shared test cast: ``owner`` (ada), a second user ``outsider`` (ben), ``operator`` (opal).

As healthchecks' ``hc/test.py`` does, every test meets the same three people, so a cross-user
denial test is always one fixture away and reads the same in every app. ``tests/conftest.py``
registers these fixtures for the whole suite; a test asks for them by name::

    def test_outsider_cannot_read_owner_inbox(owner, outsider_client): ...

The people are built by ``tests.accounts.factories.UserFactory`` (verified email, live email
claim, password ``PASSWORD``); their usernames are ordinary, unreserved names, so a test may
sign up or rename around them. Need a fourth person? ``UserFactory()``.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import create_token
from tests.accounts.factories import PASSWORD, UserFactory

__all__ = ["PASSWORD", "bearer"]


def bearer(raw: str) -> dict[str, str]:
    """Request headers that present an access token."""
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def _cast_member(username: str, **traits: bool) -> User:
    user = UserFactory(username=username, **traits)
    # The cast's stable ids repeat from run to run; token-creation counters in Redis must not.
    cache.delete_pattern(f"access-token-create:{user.stable_user_id}:*")
    return user


@pytest.fixture
def owner(db: None) -> User:
    return _cast_member("ada")


@pytest.fixture
def outsider(db: None) -> User:
    return _cast_member("ben")


@pytest.fixture
def operator(db: None) -> User:
    return _cast_member("opal", operator=True)


def _logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(owner: User) -> Client:
    return _logged_in(owner)


@pytest.fixture
def outsider_client(outsider: User) -> Client:
    return _logged_in(outsider)


@pytest.fixture
def operator_client(operator: User) -> Client:
    return _logged_in(operator)


@pytest.fixture
def owner_token(owner: User) -> tuple[AccessToken, str]:
    return create_token(owner, "owner laptop")


@pytest.fixture
def outsider_token(outsider: User) -> tuple[AccessToken, str]:
    return create_token(outsider, "outsider laptop")


@pytest.fixture
def api() -> APIClient:
    return APIClient()
