"""The WebSocket a remote connector opens to Kody: ``/@<username>/connectors/<instanceId>``.

Protocol (JSON text frames, each with a ``type``): the connector's first message is
``connector.hello`` with ``connectorId`` (must equal the URL's instance id) and
``sharedSecret``; Kody answers ``server.ack`` or ``server.error`` and closes. After the ack
Kody asks ``tools/list`` in a ``connector.jsonrpc`` envelope (JSON-RPC 2.0) and records the
session and its tools in the owner's RemoteConnectorSession actor. ``connector.heartbeat``
keeps the session fresh; a heartbeat that finds the connector disabled, its secret rotated or
a newer session in its place ends this socket. A ``remoteConnectorCallTool`` made in any
process is queued on this session's Redis list; this socket sends it as ``tools/call`` and
puts the connector's answer on the call's reply list. Everything received is bounded in size and
time; nothing the connector sends is echoed back.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from django_redis import get_redis_connection
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from apps.accounts.services import onetime
from apps.packages.actor.connector import RemoteConnectorSession
from apps.packages.services import remote_connectors
from apps.packages.services.remote_connectors import reply_key, requests_key

PATH_RE = re.compile(r"^/@(?P<username>[A-Za-z0-9_-]{1,64})/connectors/(?P<instance>[^/]{1,64})$")
HELLO_SECONDS = 10.0
IDLE_SECONDS = 120.0
MAX_FRAME = 512 * 1024
MAX_TOOLS = 200
CALL_PREFIX = "kody-call-"
REPLY_TTL_SECONDS = 60
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
# Failed hellos (wrong secret, unknown connector) are counted per connector and per client
# address, as failed sign-ins are; once either budget is spent a hello is refused — even with
# the right secret — until the window ends, so a shared secret cannot be guessed at speed.
HELLO_WINDOW_SECONDS = 900
RATE_LIMITED_CLOSE = 4429


def _hello_budgets(username: str, instance: str, address: str) -> list[tuple[str, int]]:
    return [
        (
            f"connector:{username.lower()}/{instance}",
            int(settings.KODY_CONNECTOR_HELLO_FAILURES_PER_CONNECTOR),
        ),
        (
            f"ip:{address}",
            int(settings.KODY_CONNECTOR_HELLO_FAILURES_PER_IP),
        ),
    ]


def _hello_refused_for_rate(budgets: list[tuple[str, int]]) -> bool:
    return any(onetime.budget_spent("connector-hello", k, limit=n) for k, n in budgets)


def _count_failed_hello(budgets: list[tuple[str, int]]) -> None:
    for key, _ in budgets:
        onetime.spend_budget("connector-hello", key, window_seconds=HELLO_WINDOW_SECONDS)


def _reset_connector_budget(budgets: list[tuple[str, int]]) -> None:
    # The connector's own budget starts over once it gets in; the address's does not.
    onetime.reset_budget("connector-hello", budgets[0][0])


def _in_db_thread(fn: Any) -> Any:
    """``fn`` on Django's sync thread, its connection handled as a request's would be: a socket
    lives for hours, so no connection is held between its messages."""

    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(run)


def is_connector_socket(scope: Scope) -> bool:
    return scope["type"] == "websocket" and bool(PATH_RE.match(scope.get("path", "")))


def with_connectors(app: ASGIApp) -> ASGIApp:
    """Route connector sockets here and everything else to ``app``."""

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if is_connector_socket(scope):
            await serve(scope, receive, send)
        else:
            await app(scope, receive, send)

    return application


async def _receive(ws: WebSocket, seconds: float) -> dict[str, Any]:
    with anyio.fail_after(seconds):
        text = await ws.receive_text()
    if len(text) > MAX_FRAME:
        raise ValueError("frame too large")
    message = json.loads(text)
    if not isinstance(message, dict):
        raise ValueError("a message is a JSON object")
    return message


async def _refuse(ws: WebSocket, message: str, code: int, error: str | None = None) -> None:
    frame = {"type": "server.error", "message": message}
    if error:
        frame["code"] = error
    await ws.send_text(json.dumps(frame))
    await ws.close(code=code)


def _tools(reply: dict[str, Any]) -> list[dict[str, Any]]:
    found = (reply.get("result") or {}).get("tools") if isinstance(reply, dict) else None
    if not isinstance(found, list):
        return []
    tools = []
    for tool in found[:MAX_TOOLS]:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            tools.append({k: tool[k] for k in TOOL_FIELDS if k in tool})
    return tools


async def serve(scope: Scope, receive: Receive, send: Send) -> None:
    match = PATH_RE.match(scope["path"])
    assert match is not None
    username, instance = match["username"], match["instance"].lower()
    ws = WebSocket(scope, receive, send)
    await ws.accept()
    try:
        hello = await _receive(ws, HELLO_SECONDS)
        if hello.get("type") != "connector.hello" or hello.get("connectorId") != instance:
            await _refuse(ws, "The first message is connector.hello for this connector.", 4400)
            return
        client = scope.get("client") or ("unknown", 0)
        budgets = _hello_budgets(username, instance, str(client[0]))
        if await sync_to_async(_hello_refused_for_rate)(budgets):
            await _refuse(
                ws,
                "Too many failed attempts for this connector or from this address; wait and "
                "try again.",
                RATE_LIMITED_CLOSE,
                "rate_limited",
            )
            return
        secret = hello.get("sharedSecret")
        uid = None
        if isinstance(secret, str) and len(secret) <= 256:
            uid = await _in_db_thread(remote_connectors.authenticate)(username, instance, secret)
        if uid is None:
            await sync_to_async(_count_failed_hello)(budgets)
            await _refuse(ws, "Unknown connector or wrong shared secret.", 4401)
            return
        await sync_to_async(_reset_connector_budget)(budgets)
        await ws.send_text(json.dumps({"type": "server.ack", "connectorId": instance}))
        await _session(ws, uid, instance)
    except (WebSocketDisconnect, TimeoutError, ValueError):
        return


async def _session(ws: WebSocket, uid: str, instance: str) -> None:
    token = secrets.token_hex(16)
    ask = {"jsonrpc": "2.0", "id": "kody-tools-1", "method": "tools/list", "params": {}}
    await ws.send_text(json.dumps({"type": "connector.jsonrpc", "message": ask}))
    tools: list[dict[str, Any]] = []
    with anyio.move_on_after(HELLO_SECONDS):
        while True:
            message = await _receive(ws, HELLO_SECONDS)
            reply = message.get("message")
            if message.get("type") == "connector.jsonrpc" and isinstance(reply, dict):
                if reply.get("id") == ask["id"]:
                    tools = _tools(reply)
                    break
    call = _in_db_thread(RemoteConnectorSession.call)
    await call(
        uid,
        "hello",
        instance_id=instance,
        session_token=token,
        tools=tools,
        at=timezone.now().isoformat(),
    )
    redis = get_redis_connection("default")
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_relay, ws, redis, requests_key(uid, instance, token))
            try:
                await _listen(ws, redis, call, uid, instance, token)
            except (WebSocketDisconnect, TimeoutError, ValueError):
                pass  # the connector went away, fell silent or sent garbage: the session ends
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await call(
                uid,
                "goodbye",
                instance_id=instance,
                session_token=token,
                at=timezone.now().isoformat(),
            )


async def _listen(
    ws: WebSocket, redis: Any, call: Any, uid: str, instance: str, token: str
) -> None:
    """Heartbeats and the answers to relayed calls, until the socket ends or is superseded."""
    while True:
        message = await _receive(ws, IDLE_SECONDS)
        kind = message.get("type")
        if kind == "connector.heartbeat":
            state = await call(
                uid,
                "heartbeat",
                instance_id=instance,
                session_token=token,
                at=timezone.now().isoformat(),
            )
            if not state["current"]:
                await _refuse(ws, "This connector session has ended.", 4409)
                return
        elif kind == "connector.jsonrpc" and isinstance(message.get("message"), dict):
            reply = message["message"]
            reply_id = reply.get("id")
            if isinstance(reply_id, str) and reply_id.startswith(CALL_PREFIX):
                key = reply_key(reply_id.removeprefix(CALL_PREFIX)[:64])
                await anyio.to_thread.run_sync(_answer, redis, key, json.dumps(reply))


def _answer(redis: Any, key: str, reply: str) -> None:
    redis.rpush(key, reply)
    redis.expire(key, REPLY_TTL_SECONDS)


async def _relay(ws: WebSocket, redis: Any, key: str) -> None:
    """Send the calls queued for this session (by any process) down the socket."""
    try:
        await _relay_forever(ws, redis, key)
    except (WebSocketDisconnect, RuntimeError):
        return  # the socket closed under a send: the listener ends the session


async def _relay_forever(ws: WebSocket, redis: Any, key: str) -> None:
    while True:
        got = await anyio.to_thread.run_sync(
            lambda: redis.blpop([key], timeout=2), abandon_on_cancel=True
        )
        if got is None:
            continue
        request = json.loads(got[1])
        call = {
            "jsonrpc": "2.0",
            "id": CALL_PREFIX + request["id"],
            "method": "tools/call",
            "params": {"name": request["tool"], "arguments": request["arguments"]},
        }
        await ws.send_text(json.dumps({"type": "connector.jsonrpc", "message": call}))
