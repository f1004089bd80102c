"""In Chromium, signed out: the community browse page, a profile and a listing page render
without errors, the icon loads, and a readme's script never runs."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.community.services import listings
from apps.packages.services import packages
from tests.accounts.factories import UserFactory
from tests.community.conftest import package_files

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
RUN = uuid.uuid4().hex[:8]
README = "# Greeter\n\nSays hello.\n\n<script>window.__pwned = true</script>\n"


def test_community_pages_render_for_a_visitor(browser: Any, site: str) -> None:
    from playwright.sync_api import expect

    author = UserFactory(username=f"pub-{RUN}")
    saved = packages.save(author, package_files(author.username, readme=README))
    listing = listings.publish(author, saved["package"]["id"])["listing"]

    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)

    page.goto(f"{site}/community")
    expect(page.get_by_role("heading", name="Community packages")).to_be_visible()
    expect(page.get_by_role("link", name=f"@{author.username}/greeter")).to_be_visible()

    page.goto(f"{site}/@{author.username}")
    expect(page.get_by_role("heading", name=f"@{author.username}")).to_be_visible()
    expect(page.get_by_text("0 followers")).to_be_visible()

    page.get_by_role("link", name=f"@{author.username}/greeter").click()
    expect(page.get_by_role("heading", name="greeter", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Greeter", exact=True)).to_be_visible()
    expect(page.get_by_text(listing["id"]).first).to_be_visible()
    assert page.evaluate("window.__pwned === undefined")
    icon_ok = page.evaluate(
        "() => [...document.images].every(img => img.complete && img.naturalWidth === 256)"
    )
    assert icon_ok
    assert problems == []
    page.close()
