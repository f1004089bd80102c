"""MCP under overload and outages: the token check's outage is an HTTP 503 with Retry-After,
a tool call's is a tool error carrying the code, the status and the wait (ADR 0048)."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import OperationalError

from apps.accounts.models import AccessToken
from tests.kernel import mcp_asgi

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "audit"], available_apps=["apps.accounts"]
)


def raising(driver_error: psycopg.Error):  # type: ignore[no-untyped-def]
    """A callable that fails the way Django reports ``driver_error``."""

    def fail(*args: object, **kwargs: object) -> None:
        try:
            raise driver_error
        except psycopg.Error as exc:
            raise OperationalError(str(exc)) from exc

    return fail


def test_a_tool_call_on_a_server_out_of_connections_is_an_overloaded_tool_error(
    owner_token: tuple[AccessToken, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    too_many = psycopg.errors.TooManyConnections("sorry, too many clients already")
    monkeypatch.setattr("kody.mcp.server._invoke", raising(too_many))
    response = mcp_asgi.call_tool(owner_token[1], "whoami", {})
    assert response.status_code == 200, response.content
    result = response.json()["result"]
    assert result["isError"] is True
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "overloaded"
    assert error["details"] == {"status": 503, "retryAfter": 2}
    assert "too many clients" not in response.text  # the driver's words stay inside


def test_the_token_check_with_the_database_gone_is_a_503_with_retry_after(
    owner_token: tuple[AccessToken, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = psycopg.OperationalError("connection failed: No such file or directory")
    monkeypatch.setattr(
        "apps.accounts.services.tokens.BearerBackend.authenticate_bearer", raising(gone)
    )
    response = mcp_asgi.call_tool(owner_token[1], "whoami", {})
    assert response.status_code == 503, response.content
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "database_unavailable"
