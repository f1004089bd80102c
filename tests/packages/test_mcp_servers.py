"""Remote MCP servers: a real MCP server (the SDK's own, on loopback) is added, listed, its
tools refreshed and called through Kody, disabled (calls refused), removed. Hostile URLs are
refused with a coded 422 and nothing written; another person sees none of it."""

from __future__ import annotations

import json

import pytest

from apps.packages.actor.mcp_hub import McpClientHub
from apps.packages.models import McpServerSetting
from tests.fakes.mcp_server import McpServerFake

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def remote(settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with McpServerFake() as fake:
        yield fake


@pytest.fixture
def added(as_owner, remote):
    return as_owner.call("mcpServerAdd", name="calc", url=remote.url)["server"]


def test_an_added_server_is_connected_and_its_tools_cached(as_owner, owner, remote, added):
    assert added["name"] == "calc" and added["url"] == remote.url
    assert added["status"] == "connected" and added["enabled"] is True
    assert added["serverName"] == "fake-remote" and added["serverVersion"] == "1.2.3"
    assert sorted(t["name"] for t in added["tools"]) == ["add", "shout"]
    row = McpServerSetting.objects.get(user_id=owner.stable_user_id)
    assert (row.id, row.name, row.enabled) == (added["id"], "calc", True)
    [listed] = as_owner.call("mcpServerList")["servers"]
    assert listed["id"] == added["id"] and listed["toolCount"] == 2


def test_a_tool_is_called_through_kody(as_owner, remote, added):
    reply = as_owner.call(
        "mcpServerCallTool", serverId=added["id"], tool="add", arguments={"a": 2, "b": 40}
    )
    assert reply["isError"] is False
    assert reply["structuredContent"] == {"result": 42}
    assert reply["content"][0]["text"] == "42"
    assert remote.calls == [{"tool": "add", "a": 2, "b": 40}]


def test_refresh_answers_the_tools_with_their_schemas(as_owner, remote, added):
    reply = as_owner.call("mcpServerRefresh", serverId=added["id"])
    tools = {t["name"]: t for t in reply["tools"]}
    assert tools["shout"]["inputSchema"]["required"] == ["text"]
    assert reply["server"]["refreshedAt"] is not None


def test_a_disabled_server_refuses_calls_until_enabled(as_owner, remote, added):
    off = as_owner.call("mcpServerSetEnabled", serverId=added["id"], enabled=False)["server"]
    assert off["enabled"] is False
    error = as_owner.error(
        "mcpServerCallTool", 409, serverId=added["id"], tool="add", arguments={"a": 1, "b": 1}
    )
    assert error["code"] == "mcp_server_disabled"
    assert remote.calls == []
    as_owner.call("mcpServerSetEnabled", serverId=added["id"], enabled=True)
    reply = as_owner.call(
        "mcpServerCallTool", serverId=added["id"], tool="shout", arguments={"text": "hi"}
    )
    assert reply["structuredContent"] == {"result": "HI"}


def test_remove_forgets_the_server_and_its_state(as_owner, owner, added):
    assert as_owner.call("mcpServerRemove", serverId=added["id"])["removed"] is True
    assert as_owner.call("mcpServerList")["servers"] == []
    assert not McpServerSetting.objects.filter(user_id=owner.stable_user_id).exists()
    assert McpClientHub.call(owner.stable_user_id, "states") == {}
    as_owner.error("mcpServerRemove", 404, serverId=added["id"])


def test_a_server_that_goes_away_is_recorded_by_reconnect(as_owner, remote, added):
    remote.stop()
    server = as_owner.call("mcpServerReconnect", serverId=added["id"])["server"]
    assert server["status"] == "error" and server["lastError"]
    error = as_owner.error(
        "mcpServerCallTool", 502, serverId=added["id"], tool="add", arguments={"a": 1, "b": 1}
    )
    assert error["code"] == "mcp_server_unreachable"


def test_the_same_name_twice_is_a_conflict(as_owner, remote, added):
    error = as_owner.error("mcpServerAdd", 409, name="calc", url=remote.url)
    assert error["code"] == "mcp_server_name_taken"
    assert McpServerSetting.objects.count() == 1


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.7/mcp",
        "https://169.254.169.254/latest/meta-data",
        "https://192.168.1.1/mcp",
        "https://[::ffff:10.0.0.1]/mcp",
        "https://[fd00::1]/mcp",
    ],
)
def test_a_private_address_is_refused_and_nothing_written(as_owner, owner, settings, url):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    error = as_owner.error("mcpServerAdd", 422, name="inside", url=url)
    assert error["code"] == "mcp_server_url_refused"
    assert not McpServerSetting.objects.filter(user_id=owner.stable_user_id).exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/mcp",  # plain http off loopback
        "https://user:pw@example.com/mcp",  # credentials in the URL
        "file:///etc/passwd",
        "not a url",
    ],
)
def test_a_malformed_url_is_refused_and_nothing_written(as_owner, owner, url):
    error = as_owner.error("mcpServerAdd", 422, name="bad", url=url)
    assert error["code"] == "mcp_server_url_invalid"
    assert not McpServerSetting.objects.filter(user_id=owner.stable_user_id).exists()


def test_loopback_is_refused_outside_the_test_setting(as_owner, owner, settings, remote):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    error = as_owner.error("mcpServerAdd", 422, name="local", url=remote.url)
    assert error["code"] in {"mcp_server_url_invalid", "mcp_server_url_refused"}
    assert not McpServerSetting.objects.filter(user_id=owner.stable_user_id).exists()


def test_a_server_asking_for_authorization_is_saved_as_such(as_owner, settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with McpServerFake(token="t0ken-never-shown") as locked:
        server = as_owner.call("mcpServerAdd", name="locked", url=locked.url)["server"]
        assert server["status"] == "auth_required" and server["toolCount"] == 0
        error = as_owner.error(
            "mcpServerCallTool", 502, serverId=server["id"], tool="add", arguments={"a": 1, "b": 2}
        )
        assert error["code"] == "mcp_server_auth_required"
        assert locked.calls == []


def test_the_outsider_sees_and_touches_none_of_it(as_owner, as_outsider, remote, added):
    assert as_outsider.call("mcpServerList")["servers"] == []
    sid = added["id"]
    for name, args in [
        ("mcpServerReconnect", {}),
        ("mcpServerRefresh", {}),
        ("mcpServerSetEnabled", {"enabled": False}),
        ("mcpServerCallTool", {"tool": "add", "arguments": {"a": 1, "b": 1}}),
        ("mcpServerRemove", {}),
    ]:
        error = as_outsider.error(name, 404, serverId=sid, **args)
        assert error["code"] == "mcp_server_not_found"
    assert remote.calls == []
    [still] = as_owner.call("mcpServerList")["servers"]
    assert still["enabled"] is True
    # The same name is free for another person.
    theirs = as_outsider.call("mcpServerAdd", name="calc", url=remote.url)["server"]
    assert theirs["id"] != sid
    assert json.dumps(as_outsider.call("mcpServerList")).count(sid) == 0


def test_agent_code_calls_the_tool_through_the_runtime(as_owner, as_outsider, remote, added):
    code = (
        "async (p) => (await kody.mcpServerCallTool("
        "{serverId: p.id, tool: 'add', arguments: {a: 5, b: 6}})).structuredContent.result"
    )
    ran = as_owner.call("execute", code=code, params={"id": added["id"]})
    assert ran["result"] == 11
    assert remote.calls == [{"tool": "add", "a": 5, "b": 6}]
    catch = (
        "async (p) => { try { await kody.mcpServerCallTool({serverId: p.id, tool: 'add', "
        "arguments: {a: 1, b: 1}}) } catch (e) { return e.code } }"
    )
    theirs = as_outsider.call("execute", code=catch, params={"id": added["id"]})
    assert theirs["result"] == "mcp_server_not_found"
    assert len(remote.calls) == 1


def test_a_name_resolving_to_loopback_is_refused_outside_the_test_setting(as_owner, settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    error = as_owner.error("mcpServerAdd", 422, name="local", url="https://localhost:9/mcp")
    assert error["code"] == "mcp_server_url_refused"
    assert not McpServerSetting.objects.exists()


def test_a_saved_server_that_turns_inward_is_refused_at_connect_time(
    as_owner, settings, remote, added
):
    # What DNS rebinding looks like from here: the saved URL now leads somewhere not public.
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    error = as_owner.error(
        "mcpServerCallTool", 422, serverId=added["id"], tool="add", arguments={"a": 1, "b": 2}
    )
    assert error["code"] == "mcp_server_url_refused"
    assert remote.calls == []
    refreshed = as_owner.call("mcpServerRefresh", serverId=added["id"])["server"]
    assert refreshed["status"] == "error"
