"""Two unlinks at once cannot both pass the "last way in" check; hostile or odd provider
answers; usernames derived from provider logins."""

from __future__ import annotations

import secrets
import threading
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from apps.accounts import usernames
from apps.accounts.models import OAuthConnection, User
from apps.accounts.services import social
from apps.accounts.social.providers import Profile
from kody.errors import KodyError
from tests.accounts.factories import OAuthConnectionFactory, UserFactory
from tests.accounts.social.support import round_trip, signed_in_as
from tests.fakes.oauth_provider import OAuthProviderFake


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_two_concurrent_unlinks_leave_one_way_in(monkeypatch: pytest.MonkeyPatch):
    person = UserFactory(username=f"racer-{secrets.token_hex(3)}")
    User.objects.filter(pk=person.pk).update(password="!")  # no usable password
    person.refresh_from_db()
    first = OAuthConnectionFactory(user=person, provider_name="github")
    second = OAuthConnectionFactory(user=person, provider_name="google")
    # Each unlink, once it has counted, waits for the other to count too (at most a second):
    # without the user row lock both would count two and both delete.
    counted = threading.Barrier(2)
    real = social.refuse_if_last

    def slow_refuse(user: User) -> None:
        real(user)
        try:
            counted.wait(timeout=1.0)
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(social, "refuse_if_last", slow_refuse)
    results: list[Any] = [None, None]

    def run(index: int, connection_id: int) -> None:
        try:
            results[index] = social.unlink(person, connection_id)
        except KodyError as exc:
            results[index] = exc
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=run, args=(0, first.pk)),
        threading.Thread(target=run, args=(1, second.pk)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    refused = [r for r in results if isinstance(r, KodyError)]
    assert len(refused) == 1 and refused[0].code == "last_sign_in_method"
    assert OAuthConnection.objects.filter(user=person).count() == 1


uses_db = pytest.mark.django_db(databases=["default", "audit"])


@uses_db
@pytest.mark.parametrize(
    "user",
    [
        {"login": "no-id", "email": "x@example.com", "email_verified": True},
        {"id": True, "login": "bool-id", "email": "x@example.com", "email_verified": True},
        {"id": "9" * 300, "login": "long-id", "email": "x@example.com", "email_verified": True},
    ],
)
def test_a_profile_without_a_usable_id_opens_nothing(fake: OAuthProviderFake, user: dict):
    fake.user = user
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 502
    assert "provider_unavailable" in response.content.decode()
    assert signed_in_as(client) is None and not User.objects.exists()


@uses_db
def test_a_malformed_email_counts_as_no_verified_email(fake: OAuthProviderFake):
    fake.user = {**fake.user, "email": "not an <email>"}
    response = round_trip(Client(), fake)
    assert response.status_code == 403 and not User.objects.exists()


@uses_db
@pytest.mark.parametrize(
    ("login", "email"),
    [
        ("Some__Person.", "p@example.com"),
        ("", "first.last+tag@example.com"),
        ("a", "a@example.com"),
        ("admin", "adm@example.com"),
        ("x" * 80, "long@example.com"),
    ],
)
def test_derived_usernames_are_valid_free_and_unreserved(login: str, email: str):
    profile = Profile("github", "1", email, "", login)
    name = social._username_for(profile)
    assert usernames.format_error(name) is None and not usernames.is_reserved(name)
    assert not User.objects.filter(username__iexact=name).exists()
