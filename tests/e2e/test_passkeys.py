"""In Chromium with a CDP virtual authenticator (a platform passkey with user verification): a
person adds a passkey at /account/passkeys, renames it, signs out and signs back in with it
from the sign-in page, then removes it — after which the passkey no longer signs in."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from apps.accounts.models import Passkey
from tests.accounts.factories import PASSWORD, UserFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
RUN = uuid.uuid4().hex[:8]


def _virtual_authenticator(context: Any, page: Any) -> tuple[Any, str]:
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    created = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "ctap2Version": "ctap2_1",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return cdp, created["authenticatorId"]


def test_add_rename_sign_in_with_and_remove_a_passkey(
    browser: Any, site: str, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    person = UserFactory(username=f"pk-{RUN}", email=f"passkey.{RUN}@example.com")
    context = browser.new_context()
    page = context.new_page()
    cdp, authenticator_id = _virtual_authenticator(context, page)

    page.goto(f"{site}/login")
    page.get_by_label("Email or username").fill(person.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()

    page.get_by_role("link", name="Passkeys").click()
    expect(page.get_by_role("heading", name="Passkeys", exact=True)).to_be_visible()
    expect(page.get_by_text("You have no passkeys yet.")).to_be_visible()
    page.get_by_label("Name (so you can tell them apart)").fill("Test laptop")
    page.get_by_role("button", name="Add a passkey").click()
    expect(page.get_by_text("Passkey “Test laptop” added.")).to_be_visible()
    expect(page.get_by_test_id("passkey-row")).to_have_count(1)
    expect(page.get_by_role("rowheader", name="Test laptop")).to_be_visible()

    # The authenticator holds exactly the credential the server stored, for this site.
    held = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator_id})
    assert len(held["credentials"]) == 1
    stored = Passkey.objects.get(user=person)
    assert held["credentials"][0]["rpId"] == "localhost"
    assert (
        held["credentials"][0]["credentialId"].rstrip("=").replace("+", "-").replace("/", "_")
        == stored.id
    )

    page.get_by_label("New name for Test laptop").fill("Work laptop")
    page.get_by_role("button", name="Rename Test laptop").click()
    expect(page.get_by_role("rowheader", name="Work laptop")).to_be_visible()

    page.get_by_role("button", name=f"Sign out {person.username}").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_role("button", name="Use a passkey").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    stored.refresh_from_db()
    assert stored.last_used_at is not None and stored.counter >= 1
    page.goto(f"{site}/account/passkeys")
    expect(page.get_by_test_id("passkey-row")).not_to_contain_text("Not yet")
    page.screenshot(path=str(artifacts / "e2e-passkeys.png"), full_page=True)

    page.get_by_role("button", name="Remove Work laptop").click()
    expect(page.get_by_text("You have no passkeys yet.")).to_be_visible()
    assert not Passkey.objects.filter(user=person).exists()

    # The authenticator still offers its credential; the server no longer knows it.
    page.get_by_role("button", name=f"Sign out {person.username}").click()
    page.get_by_role("button", name="Use a passkey").click()
    expect(page.locator("#passkey-status")).to_contain_text("not accepted")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    context.close()
