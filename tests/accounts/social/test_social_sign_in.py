"""Social sign-in at /auth/<provider> against a local OAuth provider (tests/fakes): sign-up,
sign-in, linking while signed in, no link by email match alone, the state check, provider
errors, and endpoints only through the SSRF guard."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import OAuthConnection, User
from tests.accounts.conftest import audit_actions
from tests.accounts.factories import OAuthConnectionFactory, UserFactory
from tests.accounts.social.support import (
    authorize,
    link_round_trip,
    provider_settings,
    round_trip,
    signed_in_as,
)
from tests.fakes.oauth_provider import OAuthProviderFake

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_a_new_person_with_a_verified_github_email_gets_an_account(fake: OAuthProviderFake):
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 302 and response["Location"] == "/account"
    user = signed_in_as(client)
    assert user.email == "octo@example.com" and user.username == "octo"
    assert user.email_verified_at is not None  # verified at creation: never purged as unverified
    assert not user.has_usable_password()
    connection = OAuthConnection.objects.get(user=user)
    assert (connection.provider_name, connection.provider_id) == ("github", "4242")
    assert connection.provider_display_name == "Octo Person"
    assert ("account", "signup", "success") in audit_actions("octo@example.com")
    # The token exchange sent the client secret in the body, and the code with its verifier.
    assert fake.token_requests[-1] == {"grant_type": "authorization_code", "auth": "post"}
    assert client.get("/account").status_code == 200


def test_google_sign_up_uses_the_openid_userinfo(fake: OAuthProviderFake):
    fake.user = {"sub": "g-77", "email": "Grace@Example.com", "email_verified": True, "name": "G"}
    client = Client()
    assert round_trip(client, fake, "google").status_code == 302
    user = signed_in_as(client)
    assert user.email == "grace@example.com" and user.username == "grace"
    assert OAuthConnection.objects.filter(user=user, provider_name="google", provider_id="g-77")


def test_signing_in_again_reuses_the_account_and_keeps_next(fake: OAuthProviderFake):
    first = Client()
    round_trip(first, fake)
    user = signed_in_as(first)
    again = Client()
    response = round_trip(again, fake, next="/account/connections")
    assert response.status_code == 302 and response["Location"] == "/account/connections"
    assert signed_in_as(again) == user
    assert User.objects.filter(email="octo@example.com").count() == 1
    assert ("auth", "social_login", "success") in audit_actions(user.email)


def test_an_off_site_next_is_not_followed(fake: OAuthProviderFake):
    response = round_trip(Client(), fake, next="https://evil.example/")
    assert response["Location"] == "/account"


def test_a_taken_username_gets_a_suffix(fake: OAuthProviderFake):
    UserFactory(username="octo", email="someone-else@example.com")
    client = Client()
    round_trip(client, fake)
    assert signed_in_as(client).username.startswith("octo-")


@pytest.mark.parametrize("verified", [True, False])
def test_an_account_found_by_email_is_not_linked_without_signing_in(
    fake: OAuthProviderFake, verified: bool
):
    existing = UserFactory(email="octo@example.com")
    if not verified:
        User.objects.filter(pk=existing.pk).update(email_verified_at=None)
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 409
    page = response.content.decode()
    assert "sign_in_to_link" in page and "Sign in to link GitHub" in page
    assert "/login?next=/account/connections" in page
    assert signed_in_as(client) is None
    assert not OAuthConnection.objects.exists()
    existing.refresh_from_db()
    assert (existing.email_verified_at is not None) == verified


def test_linking_while_signed_in_then_signing_in_with_the_provider(
    fake: OAuthProviderFake, owner: User, owner_client: Client
):
    fake.user = {**fake.user, "email": owner.email}  # the same person, same address
    response = link_round_trip(owner_client, fake)
    assert response.status_code == 302 and response["Location"] == "/account/connections"
    connection = OAuthConnection.objects.get(provider_name="github", provider_id="4242")
    assert connection.user == owner
    page = owner_client.get("/account/connections").content.decode()
    assert "is linked" in page and 'data-testid="social-connections"' in page
    fresh = Client()
    round_trip(fresh, fake)
    assert signed_in_as(fresh) == owner
    assert ("auth", "social_link", "success") in audit_actions(owner.email)


def test_linking_with_the_verified_address_verifies_an_unverified_account(
    fake: OAuthProviderFake,
):
    person = UserFactory(email="octo@example.com", email_verified_at=None)
    client = Client()
    client.force_login(person)
    assert link_round_trip(client, fake).status_code == 302
    person.refresh_from_db()
    assert person.email_verified_at is not None


def test_a_provider_account_linked_elsewhere_is_not_moved(
    fake: OAuthProviderFake, owner_client: Client, outsider: User
):
    OAuthConnectionFactory(user=outsider, provider_name="github", provider_id="4242")
    response = link_round_trip(owner_client, fake)
    assert response.status_code == 409 and "connection_taken" in response.content.decode()
    assert OAuthConnection.objects.get(provider_id="4242").user == outsider


def test_linking_twice_is_harmless(fake: OAuthProviderFake, owner: User, owner_client: Client):
    link_round_trip(owner_client, fake)
    assert link_round_trip(owner_client, fake).status_code == 302
    assert OAuthConnection.objects.filter(user=owner).count() == 1


def test_linking_needs_a_signed_in_post(fake: OAuthProviderFake):
    response = Client().post("/auth/github")
    assert response.status_code == 302 and response["Location"].startswith("/login")
    # A signed-in GET does not start a link (no cross-site trigger): it goes to the page.
    assert not OAuthConnection.objects.exists()


def test_a_link_finished_in_another_signed_in_session_is_refused(
    fake: OAuthProviderFake, owner_client: Client, outsider: User
):
    callback = authorize(owner_client.post("/auth/github"), fake)
    owner_client.force_login(outsider)  # the session now belongs to someone else
    response = owner_client.get(callback)
    assert response.status_code == 400 and "state_mismatch" in response.content.decode()
    assert not OAuthConnection.objects.exists()


def test_a_state_from_another_session_or_tampered_or_replayed_is_refused(
    fake: OAuthProviderFake,
):
    victim, attacker = Client(), Client()
    callback = authorize(attacker.get("/auth/github"), fake)
    # Login CSRF: the attacker's callback opened in the victim's browser signs nobody in.
    response = victim.get(callback)
    assert response.status_code == 400 and "state_mismatch" in response.content.decode()
    assert signed_in_as(victim) is None
    tampered = callback.replace("state=", "state=x")
    assert attacker.get(tampered).status_code == 400
    # The tampered try did not consume the real state... but a state works only once.
    assert attacker.get(callback).status_code == 302
    attacker.logout()
    assert attacker.get(callback).status_code == 400
    assert User.objects.filter(email="octo@example.com").count() == 1


def test_a_state_for_another_provider_is_refused(fake: OAuthProviderFake):
    client = Client()
    callback = authorize(client.get("/auth/github"), fake)
    response = client.get(callback.replace("/auth/github/", "/auth/google/"))
    assert response.status_code == 400 and "state_mismatch" in response.content.decode()


def test_the_person_cancelling_at_the_provider_gets_a_clear_page(fake: OAuthProviderFake):
    fake.deny = True
    client = Client()
    response = round_trip(client, fake)
    assert response.status_code == 400
    page = response.content.decode()
    assert "provider_error" in page and "You cancelled the sign-in at GitHub" in page
    assert signed_in_as(client) is None


def test_a_refused_token_exchange_gets_a_clear_page(fake: OAuthProviderFake, settings: Any):
    settings.KODY_SOCIAL_PROVIDERS = provider_settings(fake, secret="not-the-secret")
    response = round_trip(Client(), fake)
    assert response.status_code == 400
    page = response.content.decode()
    assert "provider_error" in page and "invalid_client" in page
    assert "not-the-secret" not in page and not User.objects.exists()


def test_an_unverified_provider_email_opens_no_account(fake: OAuthProviderFake):
    fake.user = {**fake.user, "email_verified": False}
    response = round_trip(Client(), fake)
    assert response.status_code == 403
    assert "provider_email_unverified" in response.content.decode()
    assert not User.objects.exists() and not OAuthConnection.objects.exists()


def test_a_provider_endpoint_on_a_private_address_is_refused(
    fake: OAuthProviderFake, settings: Any
):
    conf = provider_settings(fake)
    conf["github"]["token_url"] = "http://10.0.0.1/token"  # not loopback: the guard refuses it
    settings.KODY_SOCIAL_PROVIDERS = conf
    response = round_trip(Client(), fake)
    assert response.status_code == 502
    assert "provider_unavailable" in response.content.decode()


def test_only_configured_providers_are_offered(fake: OAuthProviderFake, settings: Any):
    conf = provider_settings(fake)
    conf["google"]["client_secret"] = ""
    settings.KODY_SOCIAL_PROVIDERS = conf
    page = Client().get("/login").content.decode()
    assert 'data-testid="social-github"' in page and "social-google" not in page
    assert Client().get("/auth/google").status_code == 404
    assert Client().get("/auth/google/callback?code=x&state=y").status_code == 404
    assert Client().get("/auth/nonesuch").status_code == 404
    settings.KODY_SOCIAL_PROVIDERS = {}
    assert "Continue with" not in Client().get("/signup").content.decode()


def test_no_provider_token_is_kept_shown_or_logged(
    fake: OAuthProviderFake, caplog: pytest.LogCaptureFixture
):
    import logging

    from apps.accounts.models import AuditEvent

    caplog.set_level(logging.DEBUG)
    client = Client()
    response = round_trip(client, fake)
    issued = list(fake.access_tokens) + list(fake.refresh_tokens)
    assert issued  # the exchange happened
    user = signed_in_as(client)
    stored = " ".join(
        [
            str(client.session.items()),
            str(list(OAuthConnection.objects.values())),
            str(list(User.objects.filter(pk=user.pk).values())),
            str(list(AuditEvent.objects.values())),
            client.get("/account/connections.json").content.decode(),
            client.get("/account/connections").content.decode(),
            response.content.decode(),
            caplog.text,
        ]
    )
    assert not [token for token in issued if token in stored]
