"""In Chromium, as a new person would: sign up, verify, sign in, follow the home page to the
connections page, and copy the MCP URL and the Claude Code command with the Copy buttons."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
PASSWORD = "amber-orchard-signal-17"
RUN = uuid.uuid4().hex[:8]  # a fresh identity per run, so nothing left over can collide
EMAIL = f"connect.person.{RUN}@example.com"
USERNAME = f"connect-{RUN}"


def _verify_link(mailoutbox: list[Any], email: str) -> str:
    message = next(m for m in mailoutbox if m.to == [email])
    match = re.search(r"https?://\S+/verify\?token=[\w\-]+", message.body)
    assert match, message.body
    return match.group(0)


def test_signup_then_connections_then_copy(
    browser: Any, site: str, mailoutbox: list[Any], artifacts: Path
) -> None:
    from playwright.sync_api import expect

    # The Clipboard API needs the page's permission; a person's browser asks, this one is told.
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site)
    page = context.new_page()

    page.goto(f"{site}/signup")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    page.goto(_verify_link(mailoutbox, EMAIL))
    page.get_by_role("button", name="Verify email address").click()
    page.get_by_role("link", name="Sign in").first.click()
    page.get_by_label("Email or username").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()

    # A person with nothing connected is pointed straight at the one-step setup.
    page.get_by_role("link", name="Connect one").click()
    expect(page.get_by_role("heading", name="Connect an agent")).to_be_visible()
    mcp_url = f"{site}/mcp"
    expect(page.get_by_test_id("mcp-url")).to_have_text(mcp_url)

    # Located by what they copy: a clicked button's label changes to "Copied".
    copy_url = page.locator('button[data-copy="mcp-url"]')
    expect(copy_url).to_have_text("Copy")
    copy_url.click()
    expect(copy_url).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == mcp_url

    command = f"claude mcp add --transport http kody {mcp_url}"
    expect(page.get_by_test_id("setup-claude-code")).to_have_text(command)
    copy_command = page.locator('button[data-copy="setup-claude-code"]')
    copy_command.click()
    expect(copy_command).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == command
    page.screenshot(path=str(artifacts / "e2e-connect-copied.png"), full_page=True)
    context.close()
