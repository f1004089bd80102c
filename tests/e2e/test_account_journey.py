"""In Chromium: a person signs up, verifies, signs in, creates a token (seen once), sees usage."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from apps.accounts.models import AccessToken, User
from apps.accounts.services import tokens

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
PASSWORD = "quiet-harbour-lantern-42"
RUN = uuid.uuid4().hex[:8]  # a fresh identity per run, so nothing left over can collide
EMAIL = f"browser.person.{RUN}@example.com"
USERNAME = f"browser-{RUN}"


def _verify_link(mailoutbox: list[Any], email: str) -> str:
    message = next(m for m in mailoutbox if m.to == [email])
    match = re.search(r"https?://\S+/verify\?token=[\w\-]+", message.body)
    assert match, message.body
    return match.group(0)


def test_signup_verify_login_token_usage(
    browser: Any, site: str, mailoutbox: list[Any], artifacts: Path
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    page = context.new_page()

    page.goto(f"{site}/signup")
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to content")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()

    page.goto(_verify_link(mailoutbox, EMAIL))
    page.get_by_role("button", name="Verify email address").click()
    expect(page.get_by_role("heading", name="Email verified")).to_be_visible()
    assert User.objects.get(username=USERNAME).email_verified_at is not None

    page.get_by_role("link", name="Sign in").first.click()
    page.get_by_label("Email or username").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    expect(page.get_by_text(USERNAME).first).to_be_visible()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Connections").click()
    page.get_by_label("Token name").fill("browser agent")
    page.get_by_role("button", name="Create token").click()
    shown = page.get_by_test_id("new-token")
    expect(shown).to_be_visible()
    plaintext = shown.inner_text().strip()
    assert plaintext.startswith("kody_pat_")
    page.screenshot(path=str(artifacts / "e2e-token-created.png"), full_page=True)
    token = tokens.authenticate_bearer(plaintext)
    assert token is not None and token.user.username == USERNAME
    assert plaintext not in AccessToken.objects.get(pk=token.pk).token_hash

    page.goto(f"{site}/account/connections")
    expect(page.get_by_role("rowheader", name="browser agent")).to_be_visible()
    assert plaintext not in page.content()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage")).to_be_visible()
    usage_table = page.get_by_role("table")
    expect(usage_table).to_be_visible()
    expect(usage_table).to_contain_text("250")  # the free plan's daily execute calls
    expect(page.get_by_text("counts are unavailable")).to_have_count(0)
    page.screenshot(path=str(artifacts / "e2e-usage.png"), full_page=True)
    context.close()


def test_signup_works_without_javascript(
    browser: Any, site: str, mailoutbox: list[Any], artifacts: Path
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{site}/signup")
    page.get_by_label("Email").fill("not-an-address")
    page.get_by_label("Username").fill("no-js-person")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("alert")).to_contain_text("Enter a valid email address")
    expect(page.get_by_label("Email")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Email")).to_be_focused()

    page.get_by_label("Email").fill("no.js@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    assert User.objects.filter(username="no-js-person").exists()
    assert any(m.to == ["no.js@example.com"] for m in mailoutbox)
    page.screenshot(path=str(artifacts / "e2e-no-js-signup.png"), full_page=True)
    context.close()
