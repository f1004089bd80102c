"""/account/packages: the owner's packages and repos, a package's source and settings, and
the approval that publishes a locked package's pushed commit. Nobody else's."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.packages.models import EntitySource, SavedPackage
from apps.packages.services import packages, repos
from tests.packages.test_packages import files
from tests.packages.test_reconcile import GOOD, pushed

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_sees_packages_repos_and_a_package_source(owner, outsider):
    saved = packages.save(owner, files())["package"]
    repos.create(owner.stable_user_id, "scratchpad")
    repos.create(outsider.stable_user_id, "bens-secret-repo")
    client = signed_in(owner)
    body = client.get("/account/packages").content.decode()
    assert "@ada/greeter" in body and "scratchpad" in body and "bens-secret-repo" not in body
    detail = client.get(f"/account/packages/{saved['id']}").content.decode()
    assert saved["publishedCommit"] in detail and "mod.ts" in detail and "README.md" in detail


def test_the_owner_hides_makes_public_and_locks(owner):
    saved = packages.save(owner, files())["package"]
    client = signed_in(owner)
    url = f"/account/packages/{saved['id']}/settings"
    assert client.post(url, {"setting": "hidden", "value": "on"}).status_code == 302
    assert client.post(url, {"setting": "private"}).status_code == 302
    assert client.post(url, {"setting": "locked", "value": "on"}).status_code == 302
    row = SavedPackage.objects.get(id=saved["id"])
    assert row.hidden and not row.is_private and row.locked_at is not None


def test_a_locked_package_publishes_the_approved_commit_only(owner):
    saved = packages.save(owner, files())["package"]
    packages.update(owner.stable_user_id, saved["id"], locked=True)
    source = EntitySource.objects.get(id=saved["sourceId"])
    new = pushed(source, GOOD)
    assert packages.publish_external_push(owner, saved["id"]).status == "rejected"

    client = signed_in(owner)
    page = client.get(f"/account/packages/{saved['id']}").content.decode()
    assert "Approve and publish" in page and new in page
    stale = client.post(f"/account/packages/{saved['id']}/approve", {"commit": "f" * 40})
    assert stale.status_code == 409
    response = client.post(f"/account/packages/{saved['id']}/approve", {"commit": new})
    assert response.status_code == 302
    source.refresh_from_db()
    assert source.published_commit == new
    assert SavedPackage.objects.get(id=saved["id"]).locked_at is not None  # still locked


def test_another_user_gets_not_found_and_changes_nothing(owner, outsider):
    saved = packages.save(owner, files())["package"]
    client = signed_in(outsider)
    assert client.get(f"/account/packages/{saved['id']}").status_code == 404
    url = f"/account/packages/{saved['id']}/settings"
    assert client.post(url, {"setting": "hidden", "value": "on"}).status_code == 404
    approve = client.post(f"/account/packages/{saved['id']}/approve", {"commit": "a" * 40})
    assert approve.status_code == 404
    assert SavedPackage.objects.get(id=saved["id"]).hidden is False
    assert "@ada/greeter" not in client.get("/account/packages").content.decode()


def test_signed_out_visitors_are_sent_to_sign_in(client):
    assert client.get("/account/packages").status_code == 302
