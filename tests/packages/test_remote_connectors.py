"""Remote connectors: a connector registered on the account page says hello over its WebSocket
with the shared secret, lists its tools and shows as connected; a wrong secret, a disabled
connector or another person's name is refused. The secret never appears on a page, in a reply
or in an export; deletion purges the sessions."""

from __future__ import annotations

import json
import secrets as pysecrets
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from apps.accounts.export import service as export
from apps.accounts.services import onetime
from apps.packages.actor.connector import RemoteConnectorSession
from apps.packages.connector_socket import with_connectors
from apps.packages.models import RemoteConnectorSetting

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

SECRET = "correct-horse-battery-staple-42"
TOOLS = [
    {"name": "lights_on", "description": "Turn the lights on.", "inputSchema": {"type": "object"}},
    {"name": "thermostat", "inputSchema": {"type": "object"}},
]


async def _nothing(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("only connector sockets are expected here")


@pytest.fixture(autouse=True)
def fresh_hello_budgets():
    """Failed hellos are counted in Redis across tests; each test starts with none."""
    keys = [f"connector:{who}" for who in ("ada/home", "ada/garage", "ben/home")]
    for key in [*keys, "ip:testclient"]:
        onetime.reset_budget("connector-hello", key)


@pytest.fixture
def sockets() -> TestClient:
    return TestClient(with_connectors(_nothing))


@pytest.fixture
def registered(owner_client, owner):
    response = owner_client.post(
        "/account/remote-connectors/new",
        {"instanceId": "Home", "sharedSecret": SECRET, "attached": "on"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/account/remote-connectors/home"
    return RemoteConnectorSetting.objects.get(user_id=owner.stable_user_id)


def hello(ws: Any, secret: str = SECRET, connector: str = "home") -> dict[str, Any]:
    ws.send_text(
        json.dumps({"type": "connector.hello", "connectorId": connector, "sharedSecret": secret})
    )
    return json.loads(ws.receive_text())


def answer_tools(ws: Any) -> None:
    ask = json.loads(ws.receive_text())
    assert ask["type"] == "connector.jsonrpc" and ask["message"]["method"] == "tools/list"
    reply = {"jsonrpc": "2.0", "id": ask["message"]["id"], "result": {"tools": TOOLS}}
    ws.send_text(json.dumps({"type": "connector.jsonrpc", "message": reply}))


def status(agent) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    return agent.call("metaListRemoteConnectorStatus")["connectors"]


def test_registering_seals_the_secret_and_never_shows_it(owner_client, as_owner, registered):
    assert registered.instance_id == "home" and registered.attached and registered.enabled
    assert SECRET not in (registered.encrypted_shared_secret or "")
    [listed] = status(as_owner)
    assert listed["instanceId"] == "home" and listed["connected"] is False
    for page in ("/account/remote-connectors", "/account/remote-connectors/home"):
        response = owner_client.get(page)
        assert response.status_code == 200 and SECRET not in response.content.decode()
    assert SECRET not in json.dumps(status(as_owner))


def test_a_connector_with_the_secret_connects_and_reports_its_tools(sockets, as_owner, registered):
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws) == {"type": "server.ack", "connectorId": "home"}
        answer_tools(ws)
        ws.send_text(json.dumps({"type": "connector.heartbeat"}))
        # The heartbeat is recorded before the next frame is read; a second one proves the first.
        ws.send_text(json.dumps({"type": "connector.heartbeat"}))
        [live] = _wait_for(as_owner, connected=True)
        assert [t["name"] for t in live["tools"]] == ["lights_on", "thermostat"]
        assert live["lastSeenAt"] is not None
    [gone] = _wait_for(as_owner, connected=False)
    assert gone["disconnectedAt"] is not None


def _wait_for(agent, connected: bool) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + 10
    while True:
        found = status(agent)
        if found and found[0]["connected"] is connected:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.05)


@pytest.mark.parametrize(
    "path, secret, connector",
    [
        ("/@ada/connectors/home", "wrong-secret-wrong-secret-wrong", "home"),
        ("/@ada/connectors/home", SECRET, "garage"),  # hello for another name
        ("/@ada/connectors/garage", SECRET, "garage"),  # not registered
        ("/@ben/connectors/home", SECRET, "home"),  # another person's URL
    ],
)
def test_a_wrong_hello_is_refused_and_nothing_recorded(
    sockets, as_owner, registered, path, secret, connector
):
    with sockets.websocket_connect(path) as ws:
        reply = hello(ws, secret, connector)
        assert reply["type"] == "server.error"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
        assert closed.value.code in {4400, 4401}
    assert status(as_owner)[0]["connectedAt"] is None


def test_a_disabled_connector_cannot_connect_and_detach_is_kept(
    owner_client, sockets, as_owner, registered
):
    assert (
        owner_client.post("/account/remote-connectors/home", {"action": "detach"}).status_code
        == 302
    )
    assert (
        owner_client.post("/account/remote-connectors/home", {"action": "disable"}).status_code
        == 302
    )
    [row] = status(as_owner)
    assert row["attached"] is False and row["enabled"] is False
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws)["type"] == "server.error"


def test_a_new_secret_replaces_the_old_one(owner_client, sockets, registered):
    fresh = "another-long-shared-secret-9876"
    response = owner_client.post(
        "/account/remote-connectors/home", {"action": "secret", "sharedSecret": fresh}
    )
    assert response.status_code == 302
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws)["type"] == "server.error"
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws, fresh)["type"] == "server.ack"


def test_bad_registrations_are_refused_and_nothing_written(owner_client, owner):
    for form in (
        {"instanceId": "-bad-", "sharedSecret": SECRET},
        {"instanceId": "home", "sharedSecret": "short"},
    ):
        response = owner_client.post("/account/remote-connectors/new", form)
        assert response.status_code == 422
        assert SECRET not in response.content.decode()
    assert not RemoteConnectorSetting.objects.filter(user_id=owner.stable_user_id).exists()


def test_the_outsider_sees_and_changes_nothing(outsider_client, as_outsider, owner, registered):
    assert status(as_outsider) == []
    assert outsider_client.get("/account/remote-connectors/home").status_code == 404
    for action in ("disable", "detach", "remove"):
        assert (
            outsider_client.post("/account/remote-connectors/home", {"action": action}).status_code
            == 404
        )
    row = RemoteConnectorSetting.objects.get(user_id=owner.stable_user_id)
    assert row.enabled and row.attached
    listing = outsider_client.get("/account/remote-connectors").content.decode()
    assert "/account/remote-connectors/home" not in listing


def test_the_json_twins_show_the_owners_connector_and_never_the_secret(
    owner_client, outsider_client, sockets, registered
):
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws)["type"] == "server.ack"
        answer_tools(ws)
        listing = owner_client.get("/account/remote-connectors.json")
        one = owner_client.get("/account/remote-connectors/home.json")
    assert listing.status_code == 200 and one.status_code == 200
    [row] = listing.json()["connectors"]
    assert row["instanceId"] == "home" and row["attached"] is True
    assert one.json()["connector"]["instanceId"] == "home"
    theirs = outsider_client.get("/account/remote-connectors.json")
    assert theirs.status_code == 200 and theirs.json() == {"connectors": []}
    missing = outsider_client.get("/account/remote-connectors/home.json")
    assert missing.status_code == 404
    for response in (listing, one, theirs, missing):
        body = response.content.decode()
        assert SECRET not in body and "session_token" not in body and "sessionToken" not in body
        assert "sharedSecret" not in body and "encrypted" not in body


def test_the_json_post_twin_changes_the_owners_connector_only(
    owner_client, outsider_client, registered
):
    path = "/account/remote-connectors/home.json"
    assert outsider_client.post(path, {"action": "detach"}).status_code == 404
    assert RemoteConnectorSetting.objects.get(id=registered.id).attached is True
    changed = owner_client.post(path, {"action": "detach"})
    assert changed.status_code == 200 and changed.json()["connector"]["attached"] is False
    rotated = owner_client.post(path, {"action": "secret", "sharedSecret": "x" * 40})
    assert rotated.status_code == 200 and "x" * 40 not in rotated.content.decode()
    assert owner_client.post(path, {"action": "nope"}).status_code == 422
    assert owner_client.post(path, {"action": "remove"}).status_code == 200
    assert not RemoteConnectorSetting.objects.filter(id=registered.id).exists()


def test_export_carries_sessions_without_secret_or_token_and_deletion_purges(
    sockets, owner, as_owner, registered
):
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        hello(ws)
        answer_tools(ws)
        _wait_for(as_owner, connected=True)
        page = export.section(owner, "remote_connector_session")["page"]
        settings_page = export.section(owner, "d1_table", table="remote_connector_settings")
    [session] = page["remote_connector_sessions"]
    [setting] = settings_page["rows"]
    assert session["instance_id"] == setting["instance_id"] == "home"
    assert "session_token" not in session and "encrypted_shared_secret" not in setting
    assert SECRET not in json.dumps([page, settings_page], default=str)
    purged = RemoteConnectorSession.call(owner.stable_user_id, "purge")
    assert purged["deleted"]["remote_connector_sessions"] == 1


def _call_in_thread(agent, **arguments: Any):  # type: ignore[no-untyped-def]
    """Start an agent's call on its own thread (it waits for the connector's answer)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def run():  # type: ignore[no-untyped-def]
        try:
            return agent.raw("remoteConnectorCallTool", **arguments)
        finally:
            connection.close()

    pool = ThreadPoolExecutor(max_workers=1)
    return pool.submit(run)


def test_an_agent_calls_a_tool_of_the_connected_connector(sockets, as_owner, registered):
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        hello(ws)
        answer_tools(ws)
        _wait_for(as_owner, connected=True)
        pending = _call_in_thread(
            as_owner, instanceId="home", tool="lights_on", arguments={"room": "kitchen"}
        )
        asked = json.loads(ws.receive_text())
        assert asked["type"] == "connector.jsonrpc"
        call = asked["message"]
        assert call["method"] == "tools/call"
        assert call["params"] == {"name": "lights_on", "arguments": {"room": "kitchen"}}
        result = {"content": [{"type": "text", "text": "kitchen lit"}], "isError": False}
        reply = {"jsonrpc": "2.0", "id": call["id"], "result": result}
        ws.send_text(json.dumps({"type": "connector.jsonrpc", "message": reply}))
        answered = pending.result(timeout=30)
    assert answered.status_code == 200, answered.content
    assert answered.json()["content"] == [{"type": "text", "text": "kitchen lit"}]


def test_calls_to_a_detached_or_absent_connector_are_refused(
    owner_client, as_owner, as_outsider, registered
):
    error = as_owner.error("remoteConnectorCallTool", 409, instanceId="home", tool="lights_on")
    assert error["code"] == "remote_connector_not_connected"
    owner_client.post("/account/remote-connectors/home", {"action": "detach"})
    error = as_owner.error("remoteConnectorCallTool", 409, instanceId="home", tool="lights_on")
    assert error["code"] == "remote_connector_detached"
    error = as_outsider.error("remoteConnectorCallTool", 404, instanceId="home", tool="lights_on")
    assert error["code"] == "remote_connector_not_found"


def test_failed_hellos_are_rate_limited_per_connector_even_with_the_right_secret(
    sockets, as_owner, registered, settings
):
    settings.KODY_CONNECTOR_HELLO_FAILURES_PER_CONNECTOR = 3
    settings.KODY_CONNECTOR_HELLO_FAILURES_PER_IP = 100
    for _ in range(3):
        with sockets.websocket_connect("/@ada/connectors/home") as ws:
            assert hello(ws, "wrong-secret-wrong-secret-wrong")["type"] == "server.error"
    with sockets.websocket_connect("/@ada/connectors/home") as ws:
        reply = hello(ws)  # the right secret, but the budget is spent
        assert reply["type"] == "server.error" and reply["code"] == "rate_limited"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
        assert closed.value.code == 4429
    assert status(as_owner)[0]["connectedAt"] is None
    assert SECRET not in json.dumps(reply)


def test_failed_hellos_are_rate_limited_per_address(registered, settings):
    settings.KODY_CONNECTOR_HELLO_FAILURES_PER_CONNECTOR = 100
    settings.KODY_CONNECTOR_HELLO_FAILURES_PER_IP = 2
    address = f"2001:db8::{pysecrets.token_hex(2)}"
    guesser = TestClient(with_connectors(_nothing), client=(address, 50000))
    for name in ("garage", "attic"):  # unknown connectors, each a failure from this address
        with guesser.websocket_connect(f"/@ada/connectors/{name}") as ws:
            assert hello(ws, SECRET, name)["type"] == "server.error"
    with guesser.websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws)["code"] == "rate_limited"
    # Another address with the right secret still gets in.
    with TestClient(with_connectors(_nothing)).websocket_connect("/@ada/connectors/home") as ws:
        assert hello(ws) == {"type": "server.ack", "connectorId": "home"}
