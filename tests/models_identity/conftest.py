from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from apps.accounts.models import User

_counter = itertools.count(1)


@pytest.fixture
def make_user() -> Callable[..., User]:
    def make(**extra: Any) -> User:
        n = next(_counter)
        return User.objects.create_user(
            username=f"user{n}", email=f"user{n}@example.com", password="pw-Secret-123", **extra
        )

    return make


@pytest.fixture
def owner(make_user: Callable[..., User]) -> User:
    return make_user()


@pytest.fixture
def outsider(make_user: Callable[..., User]) -> User:
    return make_user()
