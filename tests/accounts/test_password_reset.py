"""Password reset: no account enumeration, hashed single-use expiring links."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.accounts.models import PasswordReset, User
from tests.accounts.conftest import PASSWORD, audit_actions, link_from_mail, token_of

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
NEW_PASSWORD = "a-brand-new-passphrase"


def _request(client: Client, capture: Any, email: str) -> Any:
    with capture(execute=True):
        return client.post("/reset-password", {"email": email})


def test_unknown_and_known_addresses_get_the_same_answer(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    unknown = _request(client, django_capture_on_commit_callbacks, "nobody@example.com")
    assert mail.outbox == []
    known = _request(client, django_capture_on_commit_callbacks, owner.email)
    assert unknown.status_code == known.status_code == 200
    assert b"If an account uses" in unknown.content and b"If an account uses" in known.content
    assert [m.to for m in mail.outbox] == [[owner.email]]


def test_reset_sets_the_password_and_burns_the_link(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    _request(client, django_capture_on_commit_callbacks, owner.email)
    link = link_from_mail(mail.outbox[0], "/reset-password/confirm")
    token = token_of(link)
    assert (
        PasswordReset.objects.get(user=owner).token_hash
        == hashlib.sha256(token.encode()).hexdigest()
    )

    assert client.get(link).status_code == 200
    response = client.post(
        "/reset-password/confirm",
        {"token": token, "password": NEW_PASSWORD, "password_again": NEW_PASSWORD},
    )
    assert response.status_code == 302 and response.url == "/login"
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD) and owner.password_changed_at is not None
    assert not PasswordReset.objects.filter(user=owner).exists()
    assert ("auth", "password_reset", "success") in audit_actions(owner.email)

    again = client.post(
        "/reset-password/confirm",
        {
            "token": token,
            "password": "another-long-passphrase",
            "password_again": "another-long-passphrase",
        },
    )
    assert again.status_code == 400 and b"invalid_token" in again.content
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)


def test_weak_password_keeps_the_link_usable(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    _request(client, django_capture_on_commit_callbacks, owner.email)
    token = token_of(link_from_mail(mail.outbox[0], "/reset-password/confirm"))
    weak = client.post(
        "/reset-password/confirm", {"token": token, "password": "123", "password_again": "123"}
    )
    assert weak.status_code == 400 and b"too short" in weak.content
    assert b'aria-invalid="true"' in weak.content
    assert PasswordReset.objects.filter(user=owner).exists()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_mismatched_passwords_are_explained(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    _request(client, django_capture_on_commit_callbacks, owner.email)
    token = token_of(link_from_mail(mail.outbox[0], "/reset-password/confirm"))
    response = client.post(
        "/reset-password/confirm", {"token": token, "password": NEW_PASSWORD, "password_again": "x"}
    )
    assert response.status_code == 400 and b"do not match" in response.content


def test_expired_link_is_refused(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    _request(client, django_capture_on_commit_callbacks, owner.email)
    token = token_of(link_from_mail(mail.outbox[0], "/reset-password/confirm"))
    PasswordReset.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    assert client.get(f"/reset-password/confirm?token={token}").status_code == 400
    response = client.post(
        "/reset-password/confirm",
        {"token": token, "password": NEW_PASSWORD, "password_again": NEW_PASSWORD},
    )
    assert response.status_code == 400 and b"token_expired" in response.content
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_a_fenced_account_gets_no_reset_mail(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    _request(client, django_capture_on_commit_callbacks, owner.email)
    assert mail.outbox == []
