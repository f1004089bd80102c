"""Email verification: a confirm page that does not burn the link, single use, expiry, fence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.accounts.models import EmailVerification, User
from apps.accounts.services import identity
from tests.accounts.conftest import link_from_mail, token_of

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def unverified(make_user: Any, django_capture_on_commit_callbacks: Any) -> tuple[User, str]:
    user = make_user(verified=False)
    with django_capture_on_commit_callbacks(execute=True):
        identity.resend_verification(user)
    return user, link_from_mail(mail.outbox[-1], "/verify")


def test_opening_the_link_asks_before_verifying(client: Client, unverified: Any) -> None:
    user, link = unverified
    page = client.get(link)
    assert page.status_code == 200 and b"Verify email address" in page.content
    user.refresh_from_db()
    assert user.email_verified_at is None
    assert EmailVerification.objects.filter(user=user).exists()


def test_confirming_verifies_once(client: Client, unverified: Any) -> None:
    user, link = unverified
    response = client.post("/verify", {"token": token_of(link)})
    assert response.status_code == 200 and b"Email verified" in response.content
    user.refresh_from_db()
    assert user.email_verified_at is not None

    again = client.post("/verify", {"token": token_of(link)})
    assert again.status_code == 400 and b"invalid_token" in again.content


def test_expired_link_is_refused(client: Client, unverified: Any) -> None:
    user, link = unverified
    EmailVerification.objects.filter(user=user).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = client.post("/verify", {"token": token_of(link)})
    assert response.status_code == 400 and b"token_expired" in response.content
    user.refresh_from_db()
    assert user.email_verified_at is None


def test_unknown_token_is_refused(client: Client) -> None:
    response = client.post("/verify", {"token": "nope"})
    assert response.status_code == 400 and b"invalid_token" in response.content


def test_a_fenced_account_cannot_verify(client: Client, unverified: Any) -> None:
    user, link = unverified
    User.objects.filter(pk=user.pk).update(deleting_at=timezone.now())
    response = client.post("/verify", {"token": token_of(link)})
    assert response.status_code == 409 and b"account_deleting" in response.content
    user.refresh_from_db()
    assert user.email_verified_at is None


def test_resend_replaces_the_previous_link(
    make_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    user = make_user(verified=False)
    with django_capture_on_commit_callbacks(execute=True):
        identity.resend_verification(user)
        identity.resend_verification(user)
    first, second = (token_of(link_from_mail(m, "/verify")) for m in mail.outbox)
    with pytest.raises(identity.InvalidToken):
        identity.verify_email(first)
    assert identity.verify_email(second).email_verified_at is not None


def test_resend_from_the_account_page(
    make_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    user = make_user(verified=False)
    client = Client()
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/account/verify/resend")
    assert response.status_code == 302
    assert mail.outbox[-1].to == [user.email]
