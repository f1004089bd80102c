"""Sign in by username or email, failure budgets per account and per IP, logout by POST only."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.models import User
from apps.accounts.services import identity
from tests.accounts.conftest import PASSWORD, audit_actions

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.mark.parametrize("by", ["username", "email"])
def test_sign_in_by_username_or_email(client: Client, owner: User, by: str) -> None:
    identifier = getattr(owner, by).upper()
    response = client.post("/login", {"identifier": identifier, "password": PASSWORD})
    assert response.status_code == 302 and response.url == "/account"
    assert client.get("/account").status_code == 200
    assert ("auth", "login", "success") in audit_actions(owner.email)


def test_next_is_followed_only_within_the_site(client: Client, owner: User) -> None:
    ok = client.post(
        "/login?next=/account/usage", {"identifier": owner.username, "password": PASSWORD}
    )
    assert ok.url == "/account/usage"
    client.logout()
    evil = client.post(
        "/login?next=https://evil.example/", {"identifier": owner.username, "password": PASSWORD}
    )
    assert evil.url == "/account"


def test_wrong_password_is_a_form_error(client: Client, owner: User) -> None:
    response = client.post("/login", {"identifier": owner.username, "password": "nope-nope"})
    assert response.status_code == 400
    assert b"do not match" in response.content and b'role="alert"' in response.content
    assert ("auth", "login", "failure") in audit_actions(owner.email)
    assert "_auth_user_id" not in client.session


def test_unknown_user_gets_the_same_error(client: Client) -> None:
    response = client.post("/login", {"identifier": "ghost", "password": "nope-nope"})
    assert response.status_code == 400 and b"do not match" in response.content


def test_repeated_failures_are_rate_limited_even_with_the_right_password(
    client: Client, owner: User
) -> None:
    for _ in range(identity.LOGIN_MAX_FAILURES):
        client.post("/login", {"identifier": owner.username, "password": "wrong-guess"})
    response = client.post("/login", {"identifier": owner.username, "password": PASSWORD})
    assert response.status_code == 429
    assert b"Too many failed sign-in attempts" in response.content
    assert ("auth", "login", "rate_limited") in audit_actions(owner.email)
    assert "_auth_user_id" not in client.session


def test_the_account_budget_holds_whatever_names_it_and_from_any_ip(owner: User) -> None:
    for _ in range(identity.LOGIN_MAX_FAILURES):
        with pytest.raises(identity.InvalidCredentials):
            identity.authenticate_login(owner.email, "wrong-guess", ip="10.0.0.1")
    for name in (owner.email, owner.email.upper(), owner.username, owner.username.upper()):
        with pytest.raises(identity.RateLimited):
            identity.authenticate_login(name, PASSWORD, ip="10.0.0.2")


def test_the_ip_budget_spans_every_identifier_it_tries(owner: User) -> None:
    for n in range(identity.LOGIN_MAX_IP_FAILURES):
        with pytest.raises(identity.InvalidCredentials):
            identity.authenticate_login(f"guess{n}@example.com", "wrong-guess", ip="10.0.0.9")
    with pytest.raises(identity.RateLimited):
        identity.authenticate_login(owner.username, PASSWORD, ip="10.0.0.9")
    assert identity.authenticate_login(owner.username, PASSWORD, ip="10.0.0.10") == owner


def test_a_deleting_account_cannot_sign_in(client: Client, owner: User) -> None:
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    response = client.post("/login", {"identifier": owner.username, "password": PASSWORD})
    assert response.status_code == 409 and b"being deleted" in response.content


def test_logout_is_post_only_and_audited(owner: User, owner_client: Client) -> None:
    assert owner_client.get("/logout").status_code == 405
    response = owner_client.post("/logout")
    assert response.status_code == 302 and response.url == "/login"
    assert owner_client.get("/account").status_code == 302
    assert ("auth", "logout", "success") in audit_actions(owner.email)


def test_account_pages_need_a_session(client: Client) -> None:
    for path in ["/account", "/account/connections", "/account/usage", "/account/settings"]:
        response = client.get(path)
        assert response.status_code == 302 and response.url.startswith("/login?next=")
