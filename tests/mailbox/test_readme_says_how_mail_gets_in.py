"""A new operator learns from the README how mail reaches Kody, and that the HTTP route is shut
until its secret is set (the test beside it shows that it is)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_names_both_ways_in() -> None:
    section = README.split("## How mail gets in", 1)[1].split("\n## ", 1)[0]
    assert "manage.py deliver_email --to" in section
    assert "POST /inbound/email" in section
    assert "X-Kody-Inbound-Secret" in section and "401" in section


def test_the_variables_table_has_the_inbound_secret() -> None:
    table = README.split("## Switching to real services", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^\| `KODY_INBOUND_EMAIL_SECRET` \|.*401", table, re.MULTILINE)


@pytest.mark.django_db
def test_without_the_secret_every_inbound_request_is_401(client: Client, settings) -> None:
    settings.KODY_INBOUND_EMAIL_SECRET = ""
    response = client.post(
        "/inbound/email?to=a@example.com",
        b"Subject: hi\r\n\r\nhello",
        content_type="message/rfc822",
        HTTP_X_KODY_INBOUND_SECRET="",
    )
    assert response.status_code == 401
