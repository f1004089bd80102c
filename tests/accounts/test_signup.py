"""Signup: the stable id, the email claim, the verification mail; refusals write nothing."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core import mail
from django.test import Client

from apps.accounts.models import EmailVerification, User, UserEmailClaim
from tests.accounts.conftest import PASSWORD, audit_actions, link_from_mail, token_of, unique

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _post(client: Client, capture: Any, **data: str) -> Any:
    with capture(execute=True):
        return client.post("/signup", data)


def test_signup_creates_account_claim_and_verification_mail(
    client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    response = _post(
        client,
        django_capture_on_commit_callbacks,
        email=" New.Person@Example.com ",
        username="New-Person",
        password=PASSWORD,
    )

    assert response.status_code == 302 and response.url == "/signup/done"
    user = User.objects.get(username="new-person")
    assert user.email == "new.person@example.com"
    assert user.stable_user_id == hashlib.sha256(b"new.person@example.com").hexdigest()
    assert user.check_password(PASSWORD) and user.email_verified_at is None
    assert list(UserEmailClaim.objects.filter(user=user).values_list("email", "status")) == [
        ("new.person@example.com", "claimed")
    ]
    [message] = mail.outbox
    assert message.to == ["new.person@example.com"]
    token = token_of(link_from_mail(message, "/verify"))
    stored = EmailVerification.objects.get(user=user)
    assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in stored.token_hash
    assert audit_actions("new.person@example.com") == [("account", "signup", "success")]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"email": "not-an-email"}, "email", "valid email"),
        ({"username": "x"}, "username", "3 to 39"),
        ({"username": "bad_name"}, "username", "lowercase letters"),
        ({"password": "short"}, "password", "too short"),
        ({"password": "password123"}, "password", "too common"),
        ({"username": "support"}, "username", "reserved"),
        ({"username": "my-kody-agent"}, "username", "reserved"),
    ],
)
def test_bad_input_is_explained_and_writes_nothing(
    client: Client,
    django_capture_on_commit_callbacks: Any,
    data: dict[str, str],
    field: str,
    message: str,
) -> None:
    name = unique()
    form = {"email": f"{name}@example.com", "username": name, "password": PASSWORD, **data}
    response = _post(client, django_capture_on_commit_callbacks, **form)

    assert response.status_code in (400, 422)
    assert message in response.content.decode()
    assert f'id="id_{field}_error"' in response.content.decode()
    assert not User.objects.filter(email=form["email"].lower()).exists()
    assert UserEmailClaim.objects.count() == 0 and EmailVerification.objects.count() == 0
    assert mail.outbox == []


def test_an_existing_email_gets_the_new_address_answer_and_its_owner_is_mailed(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    fresh = _post(
        Client(),
        django_capture_on_commit_callbacks,
        email="brand.new@example.com",
        username=unique(),
        password=PASSWORD,
    )
    mail.outbox.clear()
    taken = _post(
        client,
        django_capture_on_commit_callbacks,
        email=owner.email.upper(),
        username=unique(),
        password=PASSWORD,
    )

    assert (taken.status_code, taken.url) == (fresh.status_code, fresh.url) == (302, "/signup/done")
    assert client.get(taken.url).content == Client().get(fresh.url).content
    assert User.objects.filter(email=owner.email).count() == 1
    assert User.objects.count() == 2
    [message] = mail.outbox
    assert message.to == [owner.email]
    assert "already has one" in message.body and "/reset-password" in message.body
    assert "/verify" not in message.body
    assert ("account", "signup", "failure") in audit_actions(owner.email)


def test_duplicate_username_is_a_conflict_case_insensitively(
    client: Client, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    response = _post(
        client,
        django_capture_on_commit_callbacks,
        email=f"{unique()}@example.com",
        username=owner.username.upper(),
        password=PASSWORD,
    )
    assert response.status_code == 409
    assert "username is taken" in response.content.decode()
    assert User.objects.count() == 1


def test_reserved_username_is_refused_with_its_own_code(
    client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    from apps.accounts.services import identity

    with pytest.raises(identity.UsernameReserved) as caught:
        identity.signup(email="a@example.com", username="Post-Master", password=PASSWORD)
    assert caught.value.code == "username_reserved" and caught.value.status == 422
    assert audit_actions("a@example.com") == [("account", "signup", "failure")]


def test_signed_in_person_is_sent_to_the_account(owner_client: Client) -> None:
    assert owner_client.get("/signup").url == "/account"


def test_csrf_is_enforced(django_capture_on_commit_callbacks: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/signup", {"email": "c@example.com", "username": "csrf-check", "password": PASSWORD}
    )
    assert response.status_code == 403
    assert not User.objects.exists()


def test_verification_mail_outcome_is_kept_on_the_account(
    client: Client, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    _post(
        client,
        django_capture_on_commit_callbacks,
        email="sent@example.com",
        username="mail-sent",
        password=PASSWORD,
    )
    assert User.objects.get(username="mail-sent").verification_email_status == "sent"

    settings.EMAIL_BACKEND = "tests.accounts.conftest.FailingEmailBackend"
    response = _post(
        client,
        django_capture_on_commit_callbacks,
        email="lost@example.com",
        username="mail-lost",
        password=PASSWORD,
    )
    assert response.status_code == 302  # the account exists; the person can ask for a resend
    user = User.objects.get(username="mail-lost")
    assert user.verification_email_status == "failed"
    assert user.verification_email_error == "ConnectionRefusedError"
