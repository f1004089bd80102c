"""Once users.deleting_at is set, every mutation is refused with 409 account_deleting."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.models import AccessToken, PendingEmailChange, User
from apps.accounts.services import identity
from tests.accounts.conftest import PASSWORD

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def fenced(owner: User) -> User:
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    return owner  # deliberately stale in memory: the guard must read the row


def test_guard_reads_the_current_row(fenced: User) -> None:
    assert fenced.deleting_at is None
    with pytest.raises(identity.AccountDeleting) as caught:
        identity.assert_can_mutate(fenced)
    assert caught.value.code == "account_deleting" and caught.value.status == 409


def test_guard_passes_a_live_account(owner: User) -> None:
    identity.assert_can_mutate(owner)


def test_decorated_services_refuse(fenced: User) -> None:
    with pytest.raises(identity.AccountDeleting):
        identity.set_experiments_opt_in(fenced, True)
    with pytest.raises(identity.AccountDeleting):
        identity.request_email_change(fenced, "new@example.com", PASSWORD)
    fenced.refresh_from_db()
    assert fenced.experiments_opt_in is False
    assert not PendingEmailChange.objects.exists()


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/account/settings/email", {"new_email": "new@example.com", "password": PASSWORD}),
        ("/account/settings/experiments", {"experiments_opt_in": "on"}),
        ("/account/settings/release-email", {"email": "old@example.com"}),
        ("/account/connections/new", {"name": "laptop"}),
        ("/account/verify/resend", {}),
    ],
)
def test_every_account_form_refuses(
    fenced: User, owner_client: Client, path: str, data: dict[str, Any]
) -> None:
    response = owner_client.post(path, data)
    assert response.status_code == 409
    assert b"account_deleting" in response.content
    assert not AccessToken.objects.exists()


def test_revoke_is_refused_too(owner: User, owner_client: Client) -> None:
    from apps.accounts.services import tokens

    token, _ = tokens.create_token(owner, "laptop")
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    response = owner_client.post(f"/account/connections/{token.pk}/revoke")
    assert response.status_code == 409
    token.refresh_from_db()
    assert token.revoked_at is None


def test_pages_show_the_deletion_notice(fenced: User, owner_client: Client) -> None:
    assert b"This account is being deleted" in owner_client.get("/account").content
