"""Reserved usernames are edited in the admin: operators reserve and release names, audited;
protected system names stay reserved; a person cannot reach the page."""

from __future__ import annotations

import pytest

from apps.accounts import usernames
from apps.accounts.models import AuditEvent

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

URL = "/admin/accounts/user/reserved-usernames/"


def test_an_operator_reserves_and_releases_a_name(operator_client):
    page = operator_client.get(URL)
    assert page.status_code == 200 and b"Reserved usernames" in page.content
    assert operator_client.post(URL, {"name": "Launchpad", "action": "add"}).status_code == 302
    assert usernames.is_reserved("launchpad") and usernames.is_reserved("my-launchpad")
    assert b"launchpad" in operator_client.get(URL).content
    operator_client.post(URL, {"name": "launchpad", "action": "remove"})
    assert not usernames.is_reserved("launchpad")
    operator_client.post(URL, {"name": "docs", "action": "remove"})  # a built-in, releasable
    assert not usernames.is_reserved("docs")
    actions = list(
        AuditEvent.objects.filter(action__startswith="reserved_username_")
        .order_by("pk")
        .values_list("action", "reason")
    )
    assert actions == [
        ("reserved_username_add", "launchpad"),
        ("reserved_username_remove", "launchpad"),
        ("reserved_username_remove", "docs"),
    ]


def test_a_protected_name_cannot_be_released(operator_client):
    response = operator_client.post(URL, {"name": "postmaster", "action": "remove"}, follow=True)
    assert b"protected" in response.content
    assert usernames.is_reserved("postmaster")


def test_the_user_list_links_to_the_page(operator_client):
    assert URL.encode() in operator_client.get("/admin/accounts/user/").content


def test_a_person_cannot_reach_the_page(owner_client):
    response = owner_client.post(URL, {"name": "grabbed", "action": "remove"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert owner_client.get(URL).status_code == 302
