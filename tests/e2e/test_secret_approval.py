"""In Chromium: the owner opens a ``secretLock`` approval link, signs in and allows the grant."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.packages.models import SecretEntry
from apps.packages.services import secrets
from tests.accounts.factories import PASSWORD, UserFactory
from tests.community.factories import CommunityForkFactory
from tests.packages.factories import SavedPackageFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
RUN = uuid.uuid4().hex[:8]  # a fresh identity per run, so nothing left over can collide


def test_owner_approves_a_secret_grant_in_the_browser(browser: Any, site: str) -> None:
    from playwright.sync_api import expect

    owner = UserFactory(username=f"approver-{RUN}")
    uid = owner.stable_user_id
    secrets.set_many(
        uid, [secrets.NewSecret("API_KEY", "sk-e2e-never-shown", allowed_hosts=["api.x.com"])]
    )
    package = SavedPackageFactory(
        user_id=uid, name=f"forked-{RUN}", kody_id=f"@{RUN}/forked", source_id=f"src-{RUN}"
    )
    CommunityForkFactory(forker_user_id=uid, forked_package_id=package.id)
    path = secrets.approval_path("API_KEY", package.id)

    page = browser.new_page()
    page.goto(f"{site}{path}")  # signed out: the login page, then back to the approval
    page.get_by_label("Email or username").fill(owner.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Approve a secret grant")).to_be_visible()
    expect(page.get_by_text("sk-e2e-never-shown")).to_have_count(0)

    page.get_by_role("button", name=f"Allow forked-{RUN} to use API_KEY").click()
    expect(page.get_by_role("heading", name="Secrets")).to_be_visible()
    expect(page.get_by_label(f"forked-{RUN}")).to_be_checked()
    assert SecretEntry.objects.get(bucket__user_id=uid).allowed_packages == [package.id]
    page.close()
