"""Accounts tests: signup-made users, mail links and audit rows (the cast is tests/cast.py)."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.core import mail

from apps.accounts.models import AuditEvent, User
from apps.accounts.services import audit, identity
from tests.cast import PASSWORD

_counter = itertools.count(1)


def unique(prefix: str = "person") -> str:
    return f"{prefix}{next(_counter)}x"


def link_from_mail(message: mail.EmailMessage, path: str) -> str:
    """The path + query of the one-time link in a mail body (relative, for the test client)."""
    match = re.search(r"https?://[^/\s]+(" + re.escape(path) + r"\?token=[\w\-]+)", message.body)
    assert match, f"no {path} link in {message.body!r}"
    return match.group(1)


def token_of(link: str) -> str:
    return link.split("token=", 1)[1]


def audit_actions(email: str | None = None) -> list[tuple[str, str, str]]:
    rows = AuditEvent.objects.order_by("pk")
    if email is not None:
        rows = rows.filter(email_hash=audit.email_hash(email))
    return [(r.category, r.action, r.result) for r in rows]


@pytest.fixture(autouse=True)
def _inline_actors(settings: Any) -> None:
    # Usage pages read the UserMeter actor; run actor calls in-process instead of on a worker.
    settings.KODY_ACTORS_INLINE = True


@pytest.fixture(autouse=True)
def _isolated_cache(settings: Any) -> None:
    # Rate-limit counters live in Redis; a per-test key prefix keeps runs independent without
    # flushing a Redis that other processes may share.
    settings.CACHES = {
        **settings.CACHES,
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"kody-test-{uuid.uuid4().hex}"},
    }


@pytest.fixture
def make_user(django_capture_on_commit_callbacks: Any) -> Callable[..., User]:
    def make(*, verified: bool = True, password: str = PASSWORD, **extra: Any) -> User:
        name = unique()
        with django_capture_on_commit_callbacks(execute=True):
            user = identity.signup(
                email=extra.pop("email", f"{name}@example.com"),
                username=extra.pop("username", name),
                password=password,
            )
        if verified:
            User.objects.filter(pk=user.pk).update(email_verified_at="2026-01-01T00:00:00Z")
            user.refresh_from_db()
        mail.outbox.clear()
        return user

    return make


class FailingEmailBackend:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def send_messages(self, messages: Any) -> int:
        raise ConnectionRefusedError("smtp down")
