"""The account pages of remote MCP servers (/account/mcp-servers, /new, /<serverId>) for the
owner and the outsider, and what export and deletion do with the servers and the hub's state."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from apps.accounts.export import service as export
from apps.packages.models import McpServerSetting
from kody.userschema.schemas import has_actor_state
from tests.fakes.mcp_server import McpServerFake
from tests.packages.conftest import Agent

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def remote(settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with McpServerFake() as fake:
        yield fake


@pytest.fixture
def server_id(owner_client, owner, remote) -> str:
    response = owner_client.post("/account/mcp-servers/new", {"name": "calc", "url": remote.url})
    assert response.status_code == 302
    row = McpServerSetting.objects.get(user_id=owner.stable_user_id)
    assert response["Location"] == f"/account/mcp-servers/{row.id}"
    return row.id


def test_the_owner_adds_sees_and_manages_a_server(owner_client, server_id):
    listing = owner_client.get("/account/mcp-servers").content.decode()
    assert "calc" in listing and f"/account/mcp-servers/{server_id}" in listing
    page = owner_client.get(f"/account/mcp-servers/{server_id}").content.decode()
    assert "connected" in page and "Add two numbers." in page
    for action in ("refresh", "reconnect", "disable"):
        assert (
            owner_client.post(f"/account/mcp-servers/{server_id}", {"action": action}).status_code
            == 302
        )
    assert McpServerSetting.objects.get(id=server_id).enabled is False
    assert (
        owner_client.post(f"/account/mcp-servers/{server_id}", {"action": "remove"}).status_code
        == 302
    )
    assert not McpServerSetting.objects.filter(id=server_id).exists()


def test_a_private_address_on_the_page_is_refused_and_nothing_written(
    owner_client, owner, settings
):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    response = owner_client.post(
        "/account/mcp-servers/new", {"name": "meta", "url": "https://169.254.169.254/"}
    )
    assert response.status_code == 422
    assert 'data-code="mcp_server_url_refused"' in response.content.decode()
    assert not McpServerSetting.objects.filter(user_id=owner.stable_user_id).exists()


def test_the_outsider_sees_and_changes_nothing(outsider_client, server_id):
    assert (
        f"/account/mcp-servers/{server_id}"
        not in outsider_client.get("/account/mcp-servers").content.decode()
    )
    assert outsider_client.get(f"/account/mcp-servers/{server_id}").status_code == 404
    for action in ("disable", "remove", "refresh"):
        response = outsider_client.post(f"/account/mcp-servers/{server_id}", {"action": action})
        assert response.status_code == 404
    row = McpServerSetting.objects.get(id=server_id)
    assert row.enabled is True


def test_the_json_twins_show_the_owners_servers_and_tools(owner_client, server_id):
    listing = owner_client.get("/account/mcp-servers.json")
    assert listing.status_code == 200 and listing["Content-Type"] == "application/json"
    [server] = listing.json()["servers"]
    assert server["id"] == server_id and server["name"] == "calc"
    one = owner_client.get(f"/account/mcp-servers/{server_id}.json")
    assert one.status_code == 200 and one.json()["server"]["status"] == "connected"
    assert "add" in [t["name"] for t in one.json()["tools"]]


def test_the_outsider_gets_no_json_of_the_owners_servers(outsider_client, server_id):
    listing = outsider_client.get("/account/mcp-servers.json")
    assert listing.status_code == 200 and listing.json() == {"servers": []}
    assert outsider_client.get(f"/account/mcp-servers/{server_id}.json").status_code == 404


def test_the_json_post_twin_changes_the_owners_server_only(
    owner_client, outsider_client, server_id
):
    path = f"/account/mcp-servers/{server_id}.json"
    refused = outsider_client.post(path, {"action": "disable"})
    assert refused.status_code == 404 and refused.json()["error"]["code"]
    assert McpServerSetting.objects.get(id=server_id).enabled is True
    changed = owner_client.post(path, {"action": "disable"})
    assert changed.status_code == 200 and changed.json()["server"]["enabled"] is False
    bad = owner_client.post(path, {"action": "explode"})
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "action"
    assert owner_client.post(path, {"action": "remove"}).status_code == 200
    assert not McpServerSetting.objects.filter(id=server_id).exists()


def test_export_has_the_settings_and_no_hub_section(owner, server_id, remote):
    manifest = export.manifest(owner)
    page = export.section(owner, "d1_table", table="mcp_server_settings")
    [row] = page["rows"]
    assert row["id"] == server_id and row["url"] == remote.url
    excluded = {s["name"]: s["reason"] for s in manifest["excludedSurfaces"]}
    assert "cached tool lists" in excluded["packages.McpClientHub"]
    assert "packages.McpClientHub" not in {s.get("actor") for s in manifest["sections"]}


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_deleting_the_account_purges_the_servers_and_the_hub(owner, outsider, remote, settings):
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3
    Agent(owner).call("mcpServerAdd", name="calc", url=remote.url)
    Agent(outsider).call("mcpServerAdd", name="calc", url=remote.url)
    owner_id = owner.stable_user_id
    assert has_actor_state(owner_id, "packages.McpClientHub")
    call_command("purge_account", owner.email, "--yes", stdout=io.StringIO())
    assert not McpServerSetting.objects.filter(user_id=owner_id).exists()
    assert McpServerSetting.objects.filter(user_id=outsider.stable_user_id).count() == 1
    assert not has_actor_state(owner_id, "packages.McpClientHub")
