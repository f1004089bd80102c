"""Linked sign-in providers on /account/connections: listing (connections.json), unlinking
(never the last way in), isolation between people, two-factor after a social sign-in, and the
unverified purge and deletion fence around social logins."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.accounts.deletion import unverified
from apps.accounts.models import OAuthConnection, Passkey, User
from apps.accounts.services.sign_in_methods import sign_in_methods
from tests.accounts.factories import OAuthConnectionFactory, UserFactory
from tests.accounts.social.support import (
    link_round_trip,
    round_trip,
    signed_in_as,
)
from tests.fakes.oauth_provider import OAuthProviderFake

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _social_only(fake: OAuthProviderFake) -> tuple[User, Client]:
    client = Client()
    assert round_trip(client, fake).status_code == 302
    return signed_in_as(client), client


# --- listing and isolation ------------------------------------------------------------------


def test_connections_json_lists_the_owners_social_logins_only(
    fake: OAuthProviderFake, owner: User, owner_client: Client, outsider_client: Client
):
    mine = OAuthConnectionFactory(user=owner, provider_name="github", provider_display_name="ada")
    answer = owner_client.get("/account/connections.json").json()
    assert [row["id"] for row in answer["connections"]] == [mine.pk]
    assert answer["connections"][0]["provider"] == "github"
    assert answer["connections"][0]["displayName"] == "ada"
    assert {p["name"] for p in answer["providers"]} == {"github", "google"}
    assert answer["signInMethods"] == {"password": True, "passkeys": 0, "connections": 1}
    theirs = outsider_client.get("/account/connections.json").json()
    assert theirs["connections"] == [] and "ada" not in str(theirs)
    assert "ada" not in outsider_client.get("/account/connections").content.decode()
    assert Client().get("/account/connections.json").status_code == 302  # sign in first


def test_a_connection_of_one_person_never_signs_in_another(
    fake: OAuthProviderFake, owner: User, outsider: User
):
    # The provider account (id 4242) is the outsider's; its email even names the owner.
    OAuthConnectionFactory(user=outsider, provider_name="github", provider_id="4242")
    fake.user = {**fake.user, "email": owner.email}
    client = Client()
    assert round_trip(client, fake).status_code == 302
    assert signed_in_as(client) == outsider
    # The same id at another provider is another account: not the outsider's connection.
    google = Client()
    response = round_trip(google, fake, "google")
    assert response.status_code == 409 and signed_in_as(google) is None


def test_an_outsider_cannot_unlink_the_owners_connection(owner: User, outsider_client: Client):
    connection = OAuthConnectionFactory(user=owner)
    response = outsider_client.post(f"/account/connections/social/{connection.pk}/unlink")
    assert response.status_code == 404
    assert OAuthConnection.objects.filter(pk=connection.pk).exists()


# --- unlinking -----------------------------------------------------------------------------


def test_unlinking_the_last_sign_in_method_is_refused(fake: OAuthProviderFake):
    user, client = _social_only(fake)
    connection = OAuthConnection.objects.get(user=user)
    assert sign_in_methods(user).count == 1
    response = client.post(f"/account/connections/social/{connection.pk}/unlink")
    assert response.status_code == 409
    page = response.content.decode()
    assert "last_sign_in_method" in page and "only way left to sign in" in page
    assert OAuthConnection.objects.filter(pk=connection.pk).exists()


def test_unlinking_works_while_another_way_in_remains(
    fake: OAuthProviderFake, owner: User, owner_client: Client
):
    link_round_trip(owner_client, fake)  # the owner also has a password
    connection = OAuthConnection.objects.get(user=owner)
    response = owner_client.post(f"/account/connections/social/{connection.pk}/unlink")
    assert response.status_code == 302 and response["Location"] == "/account/connections"
    assert not OAuthConnection.objects.filter(user=owner).exists()
    assert "is unlinked" in owner_client.get("/account/connections").content.decode()


def test_a_second_provider_or_a_passkey_counts_as_another_way_in(fake: OAuthProviderFake):
    user, client = _social_only(fake)
    github = OAuthConnection.objects.get(user=user)
    fake.user = {**fake.user, "sub": "g-1"}
    assert link_round_trip(client, fake, "google").status_code == 302
    assert sign_in_methods(user).count == 2
    assert client.post(f"/account/connections/social/{github.pk}/unlink").status_code == 302
    google = OAuthConnection.objects.get(user=user)
    assert client.post(f"/account/connections/social/{google.pk}/unlink").status_code == 409
    Passkey.objects.create(
        id="cred-1", aaguid="0" * 32, public_key="pk", user=user,
        webauthn_user_handle="h", device_type="single_device",
    )  # fmt: skip
    assert client.post(f"/account/connections/social/{google.pk}/unlink").status_code == 302
    assert sign_in_methods(user).count == 1


def test_unlink_is_a_post(owner: User, owner_client: Client):
    connection = OAuthConnectionFactory(user=owner)
    response = owner_client.get(f"/account/connections/social/{connection.pk}/unlink")
    assert response.status_code == 405


# --- two-factor, purge, deletion fence -----------------------------------------------------------


def test_two_factor_still_applies_after_a_social_sign_in(fake: OAuthProviderFake, owner: User):
    OAuthConnectionFactory(user=owner, provider_name="github", provider_id="4242")
    TOTPDevice.objects.create(user=owner, name="authenticator", confirmed=True)
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 302 and signed_in_as(client) == owner
    page = client.get("/account")
    assert page.status_code == 302
    assert page["Location"].startswith("/account/two-factor/verify")
    assert client.get("/account/connections.json").status_code == 302


def test_an_unverified_account_with_a_social_login_is_not_purged(fake: OAuthProviderFake):
    old = timezone.now() - timedelta(days=30)
    linked = UserFactory(email_verified_at=None, created_at=old)
    control = UserFactory(email_verified_at=None, created_at=old)
    client = Client()
    client.force_login(linked)
    # The provider's address is another one: linking does not verify the account's email.
    assert link_round_trip(client, fake).status_code == 302
    linked.refresh_from_db()
    assert linked.email_verified_at is None
    assert OAuthConnection.objects.filter(user=linked).exists()
    candidates = {o.user_id for o in unverified.run_pass(limit=100, dry_run=True)}
    assert control.stable_user_id in candidates
    assert linked.stable_user_id not in candidates
    assert unverified.claim(linked) is False


def test_a_fenced_account_cannot_be_reclaimed_by_social_sign_in(fake: OAuthProviderFake):
    person = UserFactory(email_verified_at=None)
    OAuthConnectionFactory(user=person, provider_name="github", provider_id="4242")
    User.objects.filter(pk=person.pk).update(deleting_at=timezone.now())
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 409
    assert "account_deleting" in response.content.decode()
    assert signed_in_as(client) is None


def test_a_suspended_account_is_not_signed_in(fake: OAuthProviderFake, owner: User):
    OAuthConnectionFactory(user=owner, provider_name="github", provider_id="4242")
    User.objects.filter(pk=owner.pk).update(suspended_at=timezone.now())
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 403 and signed_in_as(client) is None
