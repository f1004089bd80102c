"""A suspended account is locked out of every way in: sign-in, sessions, tokens, password reset
and the admin. The admin sign-in shares /login's failure budget and audit trail."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.accounts.models import AuditEvent, User
from apps.accounts.services import audit, identity
from apps.accounts.services.tokens import create_token
from tests.accounts.conftest import audit_actions, link_from_mail, token_of
from tests.cast import PASSWORD

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def suspend(user: User) -> None:
    User.objects.filter(pk=user.pk).update(suspended_at=timezone.now())


@pytest.fixture
def operator(make_user: Any) -> User:
    user = make_user()
    User.objects.filter(pk=user.pk).update(is_staff=True)
    user.refresh_from_db()
    return user


def test_a_suspended_account_cannot_sign_in(client: Client, owner: User) -> None:
    suspend(owner)
    response = client.post("/login", {"identifier": owner.username, "password": PASSWORD})
    assert response.status_code == 403 and b"suspended" in response.content
    assert "_auth_user_id" not in client.session
    row = AuditEvent.objects.filter(email_hash=audit.email_hash(owner.email)).last()
    assert (row.action, row.result, row.reason) == ("login", "failure", "account_suspended")


def test_suspension_ends_an_existing_session(owner: User, owner_client: Client) -> None:
    assert owner_client.get("/account").status_code == 200
    suspend(owner)
    response = owner_client.get("/account")
    assert response.status_code == 302 and response.url.startswith("/login")
    assert "_auth_user_id" not in owner_client.session
    # Nothing signed in is left to mint a token with.
    minted = owner_client.post("/account/connections/new", {"name": "after suspension"})
    assert minted.status_code == 302 and minted.url.startswith("/login")
    assert not owner.access_tokens.filter(name="after suspension").exists()


def test_another_users_session_is_untouched(
    owner: User, outsider_client: Client, outsider: User
) -> None:
    suspend(owner)
    assert outsider_client.get("/account").status_code == 200


def test_suspension_refuses_existing_tokens(client: Client, owner: User) -> None:
    _, raw = create_token(owner, "laptop")
    assert client.get("/api/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    suspend(owner)
    assert client.get("/api/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_suspension_stops_password_reset(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/reset-password", {"email": owner.email})
    link = link_from_mail(mail.outbox[0], "/reset-password/confirm")
    mail.outbox.clear()
    suspend(owner)

    with django_capture_on_commit_callbacks(execute=True):
        again = client.post("/reset-password", {"email": owner.email})
    assert again.status_code == 200 and mail.outbox == []
    new = "brand-new-pass-42"
    used = client.post(link, {"token": token_of(link), "password": new, "password_again": new})
    assert used.status_code == 403 and b"account_suspended" in used.content
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_suspension_ends_an_admin_session(client: Client, operator: User) -> None:
    client.force_login(operator)
    assert client.get("/admin/").status_code == 200
    suspend(operator)
    response = client.get("/admin/")
    assert response.status_code == 302 and response.url.startswith("/admin/login/")


def test_admin_login_is_audited_on_success_and_failure(client: Client, operator: User) -> None:
    bad = client.post("/admin/login/", {"username": operator.username, "password": "wrong-guess"})
    assert bad.status_code == 200 and "_auth_user_id" not in client.session
    good = client.post("/admin/login/", {"username": operator.email, "password": PASSWORD})
    assert good.status_code == 302
    rows = AuditEvent.objects.filter(email_hash=audit.email_hash(operator.email), action="login")
    assert [(r.result, r.path) for r in rows.order_by("pk")] == [
        ("failure", "/admin/login/"),
        ("success", "/admin/login/"),
    ]


def test_admin_login_shares_the_login_failure_budget(client: Client, operator: User) -> None:
    for _ in range(identity.LOGIN_MAX_FAILURES):
        client.post("/login", {"identifier": operator.username, "password": "wrong-guess"})
    response = client.post(
        "/admin/login/", {"username": operator.username.upper(), "password": PASSWORD}
    )
    assert response.status_code == 200 and b"Too many failed sign-in attempts" in response.content
    assert "_auth_user_id" not in client.session
    assert ("auth", "login", "rate_limited") in audit_actions(operator.email)


def test_a_suspended_operator_cannot_sign_in_to_the_admin(client: Client, operator: User) -> None:
    suspend(operator)
    response = client.post("/admin/login/", {"username": operator.username, "password": PASSWORD})
    assert response.status_code == 200 and b"suspended" in response.content
    assert "_auth_user_id" not in client.session
