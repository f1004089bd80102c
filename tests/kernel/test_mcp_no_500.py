"""The REST no-500 cases (test_no_500.py) over MCP: same refusals, no driver text leaked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import create_token
from apps.entitlements.services import metering
from kody.capabilities import Context, capability, unregister
from tests.clock import today_iso
from tests.kernel import mcp_asgi

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "audit"], available_apps=["apps.accounts"]
)

Token = tuple[AccessToken, str]


@pytest.fixture
def operator_raw(operator: User) -> str:
    return create_token(operator, "ops")[1]


def tool_error(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    result = response.json()["result"]
    assert result["isError"] is True
    return json.loads(result["content"][0]["text"])["error"]


def test_get_mcp_is_405_not_a_silent_open_stream(owner_token: Token) -> None:
    response = mcp_asgi.request("GET", owner_token[1])
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_nul_is_refused_without_leaking_postgres(operator_raw: str) -> None:
    response = mcp_asgi.call_tool(
        operator_raw, "adminUserUsage", None, raw_arguments=b'{"userId": "abc\\u0000def"}'
    )
    error = tool_error(response)
    assert error["code"] == "invalid_input" and "NUL" in error["message"]
    text = response.text.lower()
    assert "postgres" not in text and "dataerror" not in text and "0x00" not in text


def test_a_lone_surrogate_is_refused(operator_raw: str) -> None:
    # The SDK's JSON-RPC parser already refuses it (strict UTF-8), before our layer sees it.
    response = mcp_asgi.call_tool(
        operator_raw, "adminUserUsage", None, raw_arguments=b'{"userId": "\\ud800"}'
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_deeply_nested_json_is_refused(owner_token: Token) -> None:
    response = mcp_asgi.call_tool(
        owner_token[1], "whoami", None, raw_arguments=b"[" * 100_000 + b"]" * 100_000
    )
    assert response.status_code == 400


def test_a_ten_megabyte_body_is_413(owner_token: Token) -> None:
    response = mcp_asgi.call_tool(owner_token[1], "whoami", {"pad": "x" * 10_000_000})
    assert response.status_code == 413


def test_an_invalid_value_is_echoed_only_in_part(operator_raw: str) -> None:
    response = mcp_asgi.call_tool(operator_raw, "adminUserUsage", {"userId": "y" * 1_000_000})
    assert tool_error(response)["code"] == "invalid_input"
    assert len(response.content) < 2_000


@pytest.fixture
def throwaway() -> Iterator[None]:
    # A charge: a write, which goes through the user's shard queue (reads do not, ADR 0030).
    @capability(name="testMeterCharge", domain="test", description="Charges the meter actor.")
    def charge(ctx: Context) -> dict[str, Any]:
        day = today_iso()
        return {"reading": metering.consume(ctx.user_id, "execute_calls_per_day", day, 1, 10**6)}

    @capability(name="testCrash", domain="test", description="Crashes.")
    def crash(ctx: Context) -> dict[str, Any]:
        raise RuntimeError('psycopg.errors.UndefinedTable: relation "secret_table"')

    yield
    unregister("testMeterCharge")
    unregister("testCrash")


def test_broker_down_reports_actor_unavailable_with_retry_after(
    owner_token: Token, settings: Any, throwaway: None
) -> None:
    settings.KODY_ACTORS_INLINE = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    error = tool_error(mcp_asgi.call_tool(owner_token[1], "testMeterCharge", {}))
    assert error["code"] == "actor_unavailable"
    assert error["details"]["status"] == 503 and error["details"]["retryAfter"] == 5
    # Reads need no broker (ADR 0030): the usage answers in full.
    usage = mcp_asgi.call_tool(owner_token[1], "accountUsage", {}).json()["result"]
    assert not usage.get("isError") and json.loads(usage["content"][0]["text"])["metered"] is True


def test_a_crash_answers_internal_error_without_its_message(
    owner_token: Token, throwaway: None
) -> None:
    response = mcp_asgi.call_tool(owner_token[1], "testCrash", {})
    assert tool_error(response)["code"] == "internal_error"
    assert "secret_table" not in response.text
