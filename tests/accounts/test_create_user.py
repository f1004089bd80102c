"""``manage.py create_user`` for operators: verified accounts, clear refusals, non-zero exits."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import User, UserEmailClaim
from tests.accounts.conftest import PASSWORD, audit_actions

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _run(*args: str) -> str:
    out = StringIO()
    call_command("create_user", *args, stdout=out)
    return out.getvalue()


def test_creates_a_verified_staff_account() -> None:
    output = _run("Ops@Example.com", "--username", "ops-person", "--password", PASSWORD, "--staff")
    user = User.objects.get(username="ops-person")
    assert user.email == "ops@example.com" and user.is_staff and user.email_verified_at
    assert user.check_password(PASSWORD)
    assert user.stable_user_id in output
    assert UserEmailClaim.objects.filter(user=user, status="claimed").count() == 1
    assert ("admin", "user_create", "success") in audit_actions("ops@example.com")


def test_without_password_the_account_needs_a_reset() -> None:
    _run("scripted@example.com", "--username", "scripted")
    assert not User.objects.get(username="scripted").has_usable_password()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["not-an-email", "--username", "someone"], "invalid_input"),
        (["a@example.com", "--username", "x"], "invalid_input"),
        (["a@example.com", "--username", "postmaster"], "username_reserved"),
        (["a@example.com", "--username", "someone", "--password", "123"], "invalid_input"),
    ],
)
def test_bad_input_fails_and_writes_nothing(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert not User.objects.exists()


def test_duplicates_fail() -> None:
    _run("dup@example.com", "--username", "dup-one")
    with pytest.raises(CommandError, match="email_taken"):
        _run("DUP@example.com", "--username", "dup-two")
    with pytest.raises(CommandError, match="username_taken"):
        _run("other@example.com", "--username", "Dup-One")
    assert User.objects.count() == 1


def test_missing_username_exits_non_zero() -> None:
    with pytest.raises(CommandError):
        _run("a@example.com")
