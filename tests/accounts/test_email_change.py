"""Email change keeps the stable id and the former address claimed; release frees the address."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core import mail
from django.test import Client

from apps.accounts.models import PendingEmailChange, User, UserEmailClaim
from apps.accounts.services import identity
from tests.accounts.conftest import PASSWORD, audit_actions, link_from_mail, token_of
from tests.accounts.factories import UserEmailClaimFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
NEW = "moved-here@example.com"


def _change(owner_client: Client, capture: Any, **data: str) -> Any:
    with capture(execute=True):
        return owner_client.post(
            "/account/settings/email", {"new_email": NEW, "password": PASSWORD, **data}
        )


@pytest.fixture
def changed(owner: User, owner_client: Client, django_capture_on_commit_callbacks: Any) -> str:
    """The owner moves to NEW; returns the former address."""
    former = owner.email
    _change(owner_client, django_capture_on_commit_callbacks)
    confirm = next(m for m in mail.outbox if m.to == [NEW])
    token = token_of(link_from_mail(confirm, "/account/email/confirm"))
    response = Client().post("/account/email/confirm", {"token": token})
    assert response.status_code == 200, response.content
    mail.outbox.clear()
    return former


def test_change_mails_the_new_address_and_warns_the_old(
    owner: User, owner_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    response = _change(owner_client, django_capture_on_commit_callbacks)
    assert response.status_code == 302
    assert sorted(m.to[0] for m in mail.outbox) == sorted([NEW, owner.email])
    owner.refresh_from_db()
    assert owner.email != NEW  # nothing changes until the new address confirms
    assert PendingEmailChange.objects.get(user=owner).new_email == NEW


def test_confirming_switches_email_but_never_the_stable_id(owner: User, changed: str) -> None:
    stable_id = owner.stable_user_id
    owner.refresh_from_db()
    assert owner.email == NEW and owner.stable_user_id == stable_id
    assert owner.stable_user_id == hashlib.sha256(changed.encode()).hexdigest()
    claims = dict(UserEmailClaim.objects.filter(user=owner).values_list("email", "status"))
    assert claims == {changed: "claimed", NEW: "claimed"}
    assert ("account", "email_change", "success") in audit_actions(changed)


def test_signup_with_a_former_address_is_409_without_leaking_the_current_one(
    client: Client, owner: User, changed: str
) -> None:
    response = client.post(
        "/signup", {"email": changed, "username": "someone-else", "password": PASSWORD}
    )
    assert response.status_code == 409
    body = response.content.decode()
    assert "former email" in body
    assert NEW not in body and owner.stable_user_id not in body
    with pytest.raises(identity.FormerEmailClaimed) as caught:
        identity.signup(email=changed, username="someone-else", password=PASSWORD)
    assert caught.value.code == "former_email_claimed"
    assert NEW not in caught.value.message


def test_released_address_signs_up_with_a_fresh_stable_id(
    owner: User, owner_client: Client, changed: str, django_capture_on_commit_callbacks: Any
) -> None:
    settings_page = owner_client.get("/account/settings")
    assert changed in settings_page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        owner_client.post("/account/settings/release-email", {"email": changed})
    [release_mail] = mail.outbox
    assert release_mail.to == [changed]
    token = token_of(link_from_mail(release_mail, "/account/email/release"))
    assert Client().post("/account/email/release", {"token": token}).status_code == 200
    assert UserEmailClaim.objects.get(user=owner, email=changed).status == "released"

    newcomer = identity.signup(email=changed, username="newcomer", password=PASSWORD)
    owner.refresh_from_db()
    assert newcomer.stable_user_id != owner.stable_user_id
    assert len(newcomer.stable_user_id) == 64


def test_change_requires_a_verified_current_address(
    make_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    user = make_user(verified=False)
    with pytest.raises(identity.EmailNotVerified):
        identity.request_email_change(user, NEW, PASSWORD)
    assert not PendingEmailChange.objects.exists()


def test_change_requires_the_current_password(
    owner_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    response = _change(owner_client, django_capture_on_commit_callbacks, password="wrong-one")
    assert response.status_code == 400 and b"not correct" in response.content
    assert not PendingEmailChange.objects.exists() and mail.outbox == []


@pytest.mark.parametrize("target", ["taken", "claimed"])
def test_address_of_another_account_is_unavailable(
    owner: User,
    outsider: User,
    owner_client: Client,
    django_capture_on_commit_callbacks: Any,
    target: str,
) -> None:
    address = outsider.email
    if target == "claimed":
        UserEmailClaimFactory(user=outsider, email="old-one@example.com")
        address = "old-one@example.com"
    response = _change(owner_client, django_capture_on_commit_callbacks, new_email=address)
    assert response.status_code == 409 and b"not available" in response.content
    assert not PendingEmailChange.objects.exists()


def test_confirm_link_is_single_use(
    owner: User, owner_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    _change(owner_client, django_capture_on_commit_callbacks)
    token = token_of(
        link_from_mail(next(m for m in mail.outbox if m.to == [NEW]), "/account/email/confirm")
    )
    assert Client().post("/account/email/confirm", {"token": token}).status_code == 200
    again = Client().post("/account/email/confirm", {"token": token})
    assert again.status_code == 400 and b"invalid_token" in again.content


def test_outsider_cannot_release_the_owners_former_address(
    outsider_client: Client, changed: str
) -> None:
    response = outsider_client.post("/account/settings/release-email", {"email": changed})
    assert response.status_code == 422
    assert mail.outbox == []
