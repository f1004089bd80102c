"""The fixed cast for mail tests (an owner, an outsider, an operator) and MIME builders."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token
from apps.entitlements.actor import UserMeter
from kody.blobs import list_prefix
from kody.blobs.keys import email_raw_prefix

DOMAIN = "mail.test"


@pytest.fixture(autouse=True)
def mail_settings(settings, tmp_path) -> None:
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_MAIL_DOMAIN = DOMAIN
    settings.KODY_INBOUND_EMAIL_SECRET = "inbound-secret-for-tests"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    storages = dict(settings.STORAGES)
    storages["email_blobs"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path / "email-blobs")},
    }
    settings.STORAGES = storages


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.delete_pattern("entitlements:*")
    yield


# The people are the suite's shared cast (tests/cast.py: owner, outsider, operator); these are
# their raw bearer keys for REST calls.


@pytest.fixture
def owner_key(owner: User) -> str:
    return create_token(owner, "owner laptop", enforce_rate_limit=False)[1]


@pytest.fixture
def outsider_key(outsider: User) -> str:
    return create_token(outsider, "outsider laptop", enforce_rate_limit=False)[1]


@pytest.fixture
def operator_key(operator: User) -> str:
    return create_token(operator, "operator laptop", enforce_rate_limit=False)[1]


def address(user: User, tag: str = "") -> str:
    return f"{user.username}{'+' + tag if tag else ''}@{DOMAIN}"


def simple_mail(subject: str = "Hello", body: str = "Hi there.\n", **headers: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = headers.pop("sender", "Ada <ada@example.org>")
    msg["To"] = headers.pop("to", f"someone@{DOMAIN}")
    msg["Subject"] = subject
    msg["Message-ID"] = headers.pop("message_id", "<m1@example.org>")
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg.set_content(body)
    return msg.as_bytes()


def deliver_cli(raw: bytes, to: str, delivery_id: str | None = None) -> dict[str, Any]:
    """Run ``manage.py deliver_email`` and parse its last stdout line."""
    out = io.StringIO()
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
    try:
        args = ["deliver_email", "--to", to]
        if delivery_id:
            args += ["--delivery-id", delivery_id]
        call_command(*args, stdout=out)
    finally:
        sys.stdin = stdin
    return json.loads(out.getvalue().strip().splitlines()[-1])


def receives_today(user: User) -> int:
    from django.utils import timezone

    day = timezone.now().date().isoformat()
    return int(
        UserMeter.call(user.stable_user_id, "read", resource="email_receives_per_day", day=day)[
            "count"
        ]
    )


def raw_blobs(user: User) -> list[str]:
    return sorted(list_prefix("email_blobs", email_raw_prefix(user.stable_user_id)))


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def cap(token: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(token)
    )
