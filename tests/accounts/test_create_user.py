"""``manage.py create_user`` for operators: verified accounts, clear refusals, non-zero exits."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from apps.accounts.models import User, UserEmailClaim
from tests.accounts.conftest import PASSWORD, audit_actions, token_of

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


def test_without_a_password_it_prints_a_one_time_link_that_sets_one(
    client: Client, settings: Any
) -> None:
    settings.SITE_URL = "http://127.0.0.1:8765"
    output = _run("scripted@example.com", "--username", "scripted", "--staff")
    user = User.objects.get(username="scripted")
    assert not user.has_usable_password()
    link = re.search(r"http://127\.0\.0\.1:8765(/reset-password/confirm\?token=\S+)", output)
    assert link, output
    new = "operator-pass-9921"
    response = client.post(
        link.group(1),
        {"token": token_of(link.group(1)), "password": new, "password_again": new},
    )
    assert response.status_code == 302
    assert (
        client.post("/admin/login/", {"username": "scripted", "password": new}).status_code == 302
    )
    assert client.get("/admin/").status_code == 200
    # The link works once.
    again = client.post(
        link.group(1), {"token": token_of(link.group(1)), "password": new, "password_again": new}
    )
    assert again.status_code == 400 or again.status_code == 404


def test_password_stdin_reads_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", StringIO(PASSWORD + "\n"))
    output = _run("piped@example.com", "--username", "piped", "--password-stdin")
    assert User.objects.get(username="piped").check_password(PASSWORD)
    assert "reset-password" not in output


def test_a_terminal_is_asked_for_the_password_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    answers = iter([PASSWORD, PASSWORD])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    _run("typed@example.com", "--username", "typed", "--staff")
    assert User.objects.get(username="typed").check_password(PASSWORD)


def test_a_mistyped_second_password_creates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    answers = iter([PASSWORD, PASSWORD + "x"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    with pytest.raises(CommandError, match="do not match"):
        _run("typo@example.com", "--username", "typo")
    assert not User.objects.exists()


def test_staff_join_the_operators_group_and_superusers_get_every_right() -> None:
    _run("anna@example.com", "--username", "anna-op", "--password", PASSWORD, "--staff")
    _run("chief@example.com", "--username", "chief-person", "--password", PASSWORD, "--superuser")
    ops = User.objects.get(username="anna-op")
    root = User.objects.get(username="chief-person")
    assert list(ops.groups.values_list("name", flat=True)) == ["operators"]
    assert ops.is_staff and not ops.is_superuser
    assert root.is_staff and root.is_superuser and not root.groups.exists()


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
