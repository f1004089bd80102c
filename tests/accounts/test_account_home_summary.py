"""The account home says what a person has in Kody — messages, memories, secrets, jobs,
packages, connected agents — with counts and the latest few, and only ever their own."""

from __future__ import annotations

import re
from email.message import EmailMessage

import pytest
from django.test import Client

from apps.accounts.models import User
from apps.packages.models import SavedPackage
from apps.packages.services import memories, secrets
from tests.accounts.factories import OAuthGrantFactory
from tests.jobs.factories import JobFactory
from tests.mailbox.conftest import address, deliver_cli, mail_settings  # noqa: F401
from tests.packages.factories import make

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _section(page: str, key: str) -> str:
    rest = page.split(f'data-testid="summary-{key}">', 1)[1]
    return re.split(r'data-testid="summary-|<h2>', rest, maxsplit=1)[0]


def _count(page: str, key: str) -> str:
    return re.search(r'<span class="count">([^<]*)</span>', _section(page, key)).group(1)


def _fill(owner: User) -> None:
    uid = owner.stable_user_id
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = (
        "friend@example.test",
        address(owner),
        "Lunch on Friday",
    )
    msg.set_content("see you")
    deliver_cli(msg.as_bytes(), address(owner), "home-1")
    memories.upsert(uid, subject="Prefers tea", summary="Tea, not coffee")
    memories.upsert(uid, subject="Lives in Lisbon", summary="Home city")
    secrets.set_many(uid, [secrets.NewSecret(name="GITHUB_TOKEN", value="ghp-not-shown")])
    JobFactory(user_id=uid, name="weekly digest")
    make(SavedPackage, user_id=uid, name="weather-report")
    OAuthGrantFactory(user=owner, client_name="Claude Code")


def test_the_owner_sees_counts_and_the_latest_of_each(owner: User, owner_client: Client) -> None:
    _fill(owner)
    page = owner_client.get("/account").content.decode()

    assert _count(page, "messages") == "1" and "Lunch on Friday" in _section(page, "messages")
    assert _count(page, "memories") == "2"
    assert "Prefers tea" in _section(page, "memories")
    assert _count(page, "secrets") == "1" and "GITHUB_TOKEN" in _section(page, "secrets")
    assert "ghp-not-shown" not in page
    assert _count(page, "jobs") == "1" and "weekly digest" in _section(page, "jobs")
    assert _count(page, "packages") == "1" and "weather-report" in _section(page, "packages")
    assert _count(page, "agents") == "1" and "Claude Code" in _section(page, "agents")
    assert 'href="/account/memories"' in _section(page, "memories")


def test_another_person_sees_none_of_it(owner: User, outsider_client: Client) -> None:
    _fill(owner)
    page = outsider_client.get("/account").content.decode()

    for key in ("messages", "memories", "secrets", "jobs", "packages", "agents"):
        assert _count(page, key) == "0", key
    for owned in ("Lunch on Friday", "Prefers tea", "GITHUB_TOKEN", "weekly digest", "Claude Code"):
        assert owned not in page
    assert "No agent is connected yet" in page
