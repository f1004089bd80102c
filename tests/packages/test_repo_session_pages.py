"""The account page for repo sessions and the usage row: the owner sees and discards their
own sessions; another person sees none and cannot discard them."""

from __future__ import annotations

import pytest

from tests.packages.factories import package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def two_sessions(as_owner, owner) -> list[str]:
    package = as_owner.call("packageSave", files=package_files(owner.username))["package"]
    ids = [as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"] for _ in "ab"]
    edits = [{"op": "write", "path": f"f{n}.txt", "content": "x"} for n in range(3)]
    as_owner.call("repoEditFiles", sessionId=ids[0], edits=edits)
    return ids


def test_the_owner_sees_source_age_changed_files_and_discards(
    client, owner, as_owner, two_sessions
):
    client.force_login(owner)
    page = client.get("/account/repo-sessions")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count(f'<th scope="row">@{owner.username}/greeter') == 2
    assert "2 of\n15 active" in html
    assert '<td class="num">3</td>' in html and '<td class="num">0</td>' in html
    assert "ago</time>" in html

    response = client.post(f"/account/repo-sessions/{two_sessions[0]}/discard")
    assert response.status_code == 302
    active = as_owner.call("repoListSessions", status="active")["sessions"]
    assert [s["id"] for s in active] == [two_sessions[1]]
    assert client.get("/account/repo-sessions").content.decode().count("Discard<") == 1


def test_another_person_sees_none_and_cannot_discard(client, outsider, as_owner, two_sessions):
    client.force_login(outsider)
    assert "No active repo sessions." in client.get("/account/repo-sessions").content.decode()
    response = client.post(f"/account/repo-sessions/{two_sessions[0]}/discard")
    assert response.status_code == 404
    active = as_owner.call("repoListSessions", status="active")["sessions"]
    assert len(active) == 2


def test_the_page_needs_a_login(client):
    assert client.get("/account/repo-sessions").status_code == 302


def test_the_usage_page_counts_active_sessions_against_the_limit(client, owner, two_sessions):
    client.force_login(owner)
    html = client.get("/account/usage").content.decode()
    assert 'aria-label="Active repo sessions: 2 of 15"' in html
    data = client.get("/account/usage.json").json()
    row = {r["resource"]: r for r in data["resources"]}["repo_sessions"]
    assert (row["used"], row["limit"]) == (2, 15)
