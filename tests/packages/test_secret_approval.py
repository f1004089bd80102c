"""``secretLock`` asks, ``/account/secrets/approve`` grants: only the owner, only in the browser."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.test import Client

from apps.packages.models import SecretEntry
from apps.packages.services import crypto, secrets
from tests.community.factories import CommunityForkFactory
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

VALUE = "sk-approve-SECRET-VALUE-never-shown"


@pytest.fixture(autouse=True)
def fresh_keyring():
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


@pytest.fixture
def forked(owner):
    """A user secret and an unadopted community fork that needs a grant to use it."""
    uid = owner.stable_user_id
    secrets.set_many(uid, [secrets.NewSecret("API_KEY", VALUE, allowed_hosts=["api.x.com"])])
    package = SavedPackageFactory(
        user_id=uid, name="forked", kody_id="@o/forked", source_id="src-forked"
    )
    CommunityForkFactory(forker_user_id=uid, forked_package_id=package.id)
    return package


def signed_in(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def approve_path(reply: dict) -> str:
    url = urlsplit(reply["approvalUrl"])
    return f"{url.path}?{url.query}"


def test_secret_lock_returns_an_approval_url_and_grants_nothing(as_owner, owner, forked):
    reply = as_owner.call("secretLock", name="API_KEY", packageId=forked.id)
    assert reply["granted"] is False and reply["packageId"] == forked.id
    assert approve_path(reply) == f"/account/secrets/approve?name=API_KEY&package={forked.id}"
    assert VALUE not in str(reply)
    assert SecretEntry.objects.get().allowed_packages == []
    with pytest.raises(secrets.SecretNotGranted):
        secrets.resolve_for_use(
            owner.stable_user_id, "API_KEY", package_id=forked.id, host="api.x.com"
        )


def test_owner_approves_the_grant_on_the_page(as_owner, owner, forked):
    path = approve_path(as_owner.call("secretLock", name="API_KEY", packageId=forked.id))
    client = signed_in(owner)
    page = client.get(path)
    body = page.content.decode()
    assert page.status_code == 200 and "forked" in body and "API_KEY" in body
    assert "csrfmiddlewaretoken" in body and "api.x.com" in body and VALUE not in body

    done = client.post("/account/secrets/approve", {"name": "API_KEY", "package": forked.id})
    assert done.status_code == 302 and done["Location"] == "/account/secrets"
    assert SecretEntry.objects.get().allowed_packages == [forked.id]
    used = secrets.resolve_for_use(
        owner.stable_user_id, "API_KEY", package_id=forked.id, host="api.x.com"
    )
    assert used == VALUE
    again = as_owner.call("secretLock", name="API_KEY", packageId=forked.id)
    assert again["granted"] is True
    assert "may\nalready use" in client.get(approve_path(again)).content.decode()


def test_approve_needs_the_csrf_token(owner, forked):
    client = signed_in(owner, csrf=True)
    refused = client.post("/account/secrets/approve", {"name": "API_KEY", "package": forked.id})
    assert refused.status_code == 403
    assert SecretEntry.objects.get().allowed_packages == []


def test_outsider_with_the_link_finds_nothing_and_grants_nothing(
    as_owner, as_outsider, outsider, forked
):
    path = approve_path(as_owner.call("secretLock", name="API_KEY", packageId=forked.id))
    other = signed_in(outsider)
    page = other.get(path)
    assert page.status_code == 404 and "API_KEY" not in page.content.decode().split("<h1>")[0]
    assert "forked" not in page.content.decode()
    post = other.post("/account/secrets/approve", {"name": "API_KEY", "package": forked.id})
    assert post.status_code == 404
    assert SecretEntry.objects.get().allowed_packages == []
    # The outsider cannot ask for the owner's secret or package either: not found, not forbidden.
    error = as_outsider.error("secretLock", 404, name="API_KEY", packageId=forked.id)
    assert error["code"] == "secret_not_found"


def test_secret_lock_refuses_a_package_the_caller_does_not_own(as_owner, owner, outsider, forked):
    theirs = SavedPackageFactory(
        user_id=outsider.stable_user_id, name="theirs", kody_id="@t/x", source_id="src-theirs"
    )
    error = as_owner.error("secretLock", 404, name="API_KEY", packageId=theirs.id)
    assert error["code"] == "not_found" and error["details"] == {"packageId": theirs.id}
    response = signed_in(owner).post(
        "/account/secrets/approve", {"name": "API_KEY", "package": theirs.id}
    )
    assert response.status_code == 404
    assert SecretEntry.objects.get().allowed_packages == []


def test_approve_page_needs_a_signed_in_user(forked):
    response = Client().get(f"/account/secrets/approve?name=API_KEY&package={forked.id}")
    assert response.status_code == 302 and "/login" in response["Location"]
