"""The fixed cast for entitlements tests: an owner, an outsider and an operator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import cache

from apps.accounts.models import User
from tests.entitlements.stripe_fake import StripeFake


def make_user(name: str, **extra: object) -> User:
    return User.objects.create_user(
        username=name, email=f"{name}@example.test", password="pw-long-enough-123", **extra
    )


@pytest.fixture
def owner(db: None) -> User:
    return make_user("owner")


@pytest.fixture
def outsider(db: None) -> User:
    return make_user("outsider")


@pytest.fixture
def operator(db: None) -> User:
    return make_user("operator", is_staff=True, is_superuser=True)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Tests share one Redis; a plan cached by another test must not leak in. Only our own keys
    # are dropped: FLUSHDB would also wipe a broker sharing the database.
    cache.delete_pattern("entitlements:*")
    yield


@pytest.fixture
def stripe_fake(settings) -> Iterator[StripeFake]:
    fake = StripeFake()
    settings.STRIPE_API_BASE = fake.start()
    settings.STRIPE_SECRET_KEY = "sk_test_fake"
    settings.STRIPE_WEBHOOK_SECRET = "whsec_test_fake"
    settings.BILLING_ENABLED = True
    yield fake
    fake.stop()


@pytest.fixture
def billing_off(settings) -> None:
    settings.STRIPE_SECRET_KEY = ""
    settings.STRIPE_WEBHOOK_SECRET = ""
    settings.BILLING_ENABLED = False
