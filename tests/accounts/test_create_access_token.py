from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import User
from apps.accounts.services.tokens import CREATE_LIMIT, authenticate_bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def run(*args: str) -> list[str]:
    out = StringIO()
    call_command("create_access_token", *args, stdout=out)
    return out.getvalue().strip().splitlines()


def test_prints_a_working_token_as_the_last_line(owner: User) -> None:
    lines = run(owner.email.upper(), "--name", "ci")  # addresses match case-insensitively

    token = authenticate_bearer(lines[-1])
    assert token is not None and token.user == owner and token.name == "ci"
    assert lines[-1].startswith("kody_pat_")


def test_operators_are_not_rate_limited(owner: User) -> None:
    for _ in range(CREATE_LIMIT + 1):
        run(owner.email)


def test_unknown_email_fails(db: None) -> None:
    with pytest.raises(CommandError):
        run("nobody@example.com")
