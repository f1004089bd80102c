"""The official MCP Python SDK client against a live uvicorn process serving config.asgi.

The server runs in a subprocess pointed at this run's test databases, so it sees exactly what
the test commits (hence transactional tests). Talking to it over real HTTP is the point: this is
what an agent's MCP client does.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx2
import mcp_types as types
import pytest
from django.conf import settings
from django.db import connections
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import create_token, revoke_token

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "audit"], available_apps=["apps.accounts"]
)

BASE_DIR = Path(__file__).resolve().parents[2]
Token = tuple[AccessToken, str]
T = TypeVar("T")


def database_url(alias: str) -> str:
    db = connections[alias].settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{credentials}@{quote(db['HOST'] or '', safe='')}{port}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited early:\n{log.read_text()}")
        try:
            if httpx2.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"uvicorn did not come up:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server_url(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("uvicorn") / "server.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url("default"),
        "AUDIT_DATABASE_URL": database_url("audit"),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_DB_CONN_MAX_AGE": "0",
        "KODY_SITE_URL": url,
        # No shard worker here: a mutating tool's write lease is taken in-process.
        "KODY_ACTORS_INLINE": "1",
    }
    command = [
        sys.executable, "-m", "uvicorn", "config.asgi:application",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=out, stderr=out)
    try:
        wait_until_up(proc, url, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def with_session(
    url: str,
    raw: str,
    use: Callable[[ClientSession], Awaitable[T]],
    statuses: list[int] | None = None,
) -> T:
    """Open an SDK session with the initialize handshake, then hand it to ``use``."""

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async def run() -> T:
        headers = {"Authorization": f"Bearer {raw}"}
        hooks = {"response": [record]}
        async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http:
            async with streamable_http_client(url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await use(session)

    return run_unwrapped(run)


def run_unwrapped(run: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run``, raising the one real error instead of the task groups wrapped around it."""
    try:
        return anyio.run(run)
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        raise leaf from None


def call(
    url: str,
    raw: str,
    name: str,
    arguments: dict[str, Any] | None = None,
    statuses: list[int] | None = None,
) -> Any:
    async def use(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool(name, arguments or {})

    return with_session(url, raw, use, statuses)


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error is True
    return json.loads(result.content[0].text)["error"]


def test_sdk_client_initializes_lists_tools_and_calls_whoami(
    server_url: str, owner: User, owner_token: Token
) -> None:
    async def use(session: ClientSession) -> tuple[Any, ...]:
        ping = await session.send_ping()
        tools = await session.list_tools()
        whoami = await session.call_tool("whoami", {})
        return session.initialize_result, ping, tools, whoami

    init, ping, tools, whoami = with_session(server_url, owner_token[1], use)

    assert init.server_info.name == "kody"
    assert init.capabilities.tools is not None
    assert isinstance(ping, types.EmptyResult)
    by_name = {tool.name: tool for tool in tools.tools}
    assert {"whoami", "accessTokenList", "accessTokenRevoke"} <= set(by_name)
    assert by_name["whoami"].output_schema["required"]
    assert by_name["accessTokenRevoke"].annotations.read_only_hint is False
    assert whoami.is_error is not True
    assert whoami.structured_content["userId"] == owner.stable_user_id
    assert json.loads(whoami.content[0].text)["userId"] == owner.stable_user_id


def test_sdk_client_in_its_default_auto_mode(
    server_url: str, owner: User, owner_token: Token
) -> None:
    async def run() -> types.CallToolResult:
        headers = {"Authorization": f"Bearer {owner_token[1]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            transport = streamable_http_client(server_url + "/mcp", http_client=http)
            async with Client(transport) as client:
                return await client.call_tool("whoami", {})

    result = run_unwrapped(run)
    assert result.structured_content["userId"] == owner.stable_user_id


def test_each_token_sees_only_its_own_person(
    server_url: str, owner: User, outsider: User, owner_token: Token, outsider_token: Token
) -> None:
    assert call(server_url, owner_token[1], "whoami").structured_content["userId"] == (
        owner.stable_user_id
    )
    assert call(server_url, outsider_token[1], "whoami").structured_content["userId"] == (
        outsider.stable_user_id
    )
    listed = call(server_url, owner_token[1], "accessTokenList").structured_content["tokens"]
    assert [t["id"] for t in listed] == [owner_token[0].pk]


def test_revoking_another_persons_token_is_a_not_found_tool_error(
    server_url: str, owner_token: Token, outsider_token: Token
) -> None:
    result = call(
        server_url, outsider_token[1], "accessTokenRevoke", {"tokenId": owner_token[0].pk}
    )

    assert error_of(result)["code"] == "token_not_found"
    owner_token[0].refresh_from_db()
    assert owner_token[0].revoked_at is None


def test_bad_arguments_are_an_invalid_input_tool_error(server_url: str, owner_token: Token) -> None:
    result = call(server_url, owner_token[1], "accessTokenRevoke", {"tokenId": "x"})
    error = error_of(result)
    assert error["code"] == "invalid_input"
    assert error["details"]["errors"][0]["path"] == "/tokenId"


def test_unknown_tool_is_a_json_rpc_error(server_url: str, owner_token: Token) -> None:
    with pytest.raises(MCPError) as caught:
        call(server_url, owner_token[1], "noSuchTool")
    assert caught.value.code == types.INVALID_PARAMS


def test_calls_stamp_last_used(server_url: str, owner_token: Token) -> None:
    call(server_url, owner_token[1], "whoami")
    owner_token[0].refresh_from_db()
    assert owner_token[0].last_used_at is not None


def initialize_raw(url: str, headers: dict[str, str]) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", **headers}
    return httpx2.post(url + "/mcp", json=body, headers=headers, timeout=10)


@pytest.mark.parametrize("header", [None, "Bearer kody_pat_wrong", "Basic b3duZXI6cGFzcw=="])
def test_missing_or_wrong_token_gets_401_with_www_authenticate(
    server_url: str, owner_token: Token, header: str | None
) -> None:
    response = initialize_raw(server_url, {"Authorization": header} if header else {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert response.json()["error"] == "invalid_token"


def test_good_token_raw_initialize(server_url: str, owner_token: Token) -> None:
    response = initialize_raw(server_url, {"Authorization": f"Bearer {owner_token[1]}"})
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == 1 and body["result"]["serverInfo"]["name"] == "kody"


def test_sdk_client_with_a_wrong_token_is_refused(server_url: str, owner_token: Token) -> None:
    statuses: list[int] = []
    with pytest.raises(MCPError):
        call(server_url, "kody_pat_wrong", "whoami", statuses=statuses)
    assert statuses == [401]


def test_revoked_token_is_refused(server_url: str, owner: User, owner_token: Token) -> None:
    token, raw = owner_token
    assert call(server_url, raw, "whoami").structured_content["userId"] == owner.stable_user_id

    revoke_token(owner, token.pk)

    assert initialize_raw(server_url, {"Authorization": f"Bearer {raw}"}).status_code == 401
    statuses: list[int] = []
    with pytest.raises(MCPError):
        call(server_url, raw, "whoami", statuses=statuses)
    assert statuses == [401]


def test_deleting_account_is_refused(server_url: str, owner: User) -> None:
    _, raw = create_token(owner, "soon gone")
    User.objects.filter(pk=owner.pk).update(deleting_at="2026-01-01T00:00:00Z")
    assert initialize_raw(server_url, {"Authorization": f"Bearer {raw}"}).status_code == 401
