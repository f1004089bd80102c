"""``manage.py up`` tells a fresh install how to create its first operator, and stops saying so
once there is one (the full start-up order is checked in test_command_one.py)."""

from __future__ import annotations

import pytest

from apps.accounts.models import User
from kody.management.commands.up import DEFAULT_SITE_URL, operator_hint

pytestmark = pytest.mark.django_db


def test_a_fresh_install_is_told_how_to_create_an_operator(owner: User) -> None:
    hint = operator_hint(DEFAULT_SITE_URL)
    assert hint is not None
    assert "manage.py create_user you@example.com --username you --staff" in hint
    assert "KODY_SITE_URL=" not in hint  # the default needs no prefix


def test_the_hint_points_at_where_this_server_listens() -> None:
    hint = operator_hint("http://127.0.0.1:9123")
    assert hint is not None
    assert hint.count("KODY_SITE_URL=http://127.0.0.1:9123 ") == 1
    assert "http://127.0.0.1:9123/admin/" in hint


def test_no_hint_once_an_operator_exists(operator: User) -> None:
    assert operator_hint(DEFAULT_SITE_URL) is None
