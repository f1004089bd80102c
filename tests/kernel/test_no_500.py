"""Bad input never reaches a 500 on the REST API: each case found by fuzzing, pinned here.

The MCP side of the same cases is in test_mcp_no_500.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AccessToken, AuditEvent, User
from apps.accounts.services.tokens import create_token
from apps.entitlements.services import metering
from kody.capabilities import Context, capability, unregister
from tests.cast import bearer
from tests.clock import today_iso
from tests.kernel.test_api import assert_error

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

Token = tuple[AccessToken, str]


@pytest.fixture
def operator_raw(operator: User) -> str:
    return create_token(operator, "ops")[1]


def post_raw(api: APIClient, path: str, body: bytes, raw: str) -> Any:
    return api.generic("POST", path, body, content_type="application/json", **bearer(raw))


def test_deeply_nested_json_is_400(api: APIClient, owner_token: Token) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    response = post_raw(api, "/api/v1/capabilities/whoami", body, owner_token[1])
    assert_error(response, 400, "bad_request")


def test_nesting_that_parses_but_is_too_deep_is_422(api: APIClient, operator_raw: str) -> None:
    nested: Any = "x"
    for _ in range(500):
        nested = [nested]
    body = json.dumps({"userId": nested}).encode()
    response = post_raw(api, "/api/v1/capabilities/adminUserUsage", body, operator_raw)
    error = assert_error(response, 422, "invalid_input")
    assert "nested" in error["message"]


def test_a_ten_megabyte_body_is_413(api: APIClient, owner_token: Token) -> None:
    body = json.dumps({"pad": "x" * 10_000_000}).encode()
    response = post_raw(api, "/api/v1/capabilities/whoami", body, owner_token[1])
    error = assert_error(response, 413, "payload_too_large")
    assert error["details"]["limit"] == 4 * 1024 * 1024


@pytest.mark.parametrize(
    "body",
    [
        b'{"userId": "abc\\u0000def"}',
        b'{"userId": "\\ud800"}',
        b'{"userId": "ok", "\\u0000": 1}',
    ],
    ids=["nul", "lone-surrogate", "nul-in-key"],
)
def test_unstorable_text_is_refused_before_the_handler(
    api: APIClient, operator_raw: str, body: bytes
) -> None:
    response = post_raw(api, "/api/v1/capabilities/adminUserUsage", body, operator_raw)
    error = assert_error(response, 422, "invalid_input")
    assert "NUL" in error["message"]
    assert "postgres" not in response.content.decode().lower()


def test_unstorable_text_in_a_query_string_is_refused(api: APIClient, owner_token: Token) -> None:
    response = api.get("/api/v1/whoami?name=%00", **bearer(owner_token[1]))
    assert_error(response, 422, "invalid_input")


def test_an_invalid_value_is_echoed_only_in_part(api: APIClient, operator_raw: str) -> None:
    body = json.dumps({"userId": "y" * 1_000_000}).encode()
    response = post_raw(api, "/api/v1/capabilities/adminUserUsage", body, operator_raw)
    error = assert_error(response, 422, "invalid_input")
    assert len(response.content) < 2_000
    assert "more)" in error["details"]["errors"][0]["message"]


def test_drf_format_parameter_is_not_capability_input(
    api: APIClient, owner: User, owner_token: Token
) -> None:
    response = api.get("/api/v1/whoami?format=json", **bearer(owner_token[1]))
    assert response.status_code == 200, response.content
    assert response.json()["userId"] == owner.stable_user_id


@pytest.fixture
def broker_down(settings: Any) -> None:
    settings.KODY_ACTORS_INLINE = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"


@pytest.fixture
def meter_reader() -> Iterator[None]:
    # A charge: a write, which goes through the user's shard queue (reads do not, ADR 0030).
    @capability(name="testMeterCharge", domain="test", description="Charges the meter actor.")
    def charge(ctx: Context) -> dict[str, Any]:
        day = today_iso()
        return {"reading": metering.consume(ctx.user_id, "execute_calls_per_day", day, 1, 10**6)}

    yield
    unregister("testMeterCharge")


def test_broker_down_is_503_with_retry_after(
    api: APIClient, owner_token: Token, broker_down: None, meter_reader: None
) -> None:
    response = post_raw(api, "/api/v1/capabilities/testMeterCharge", b"{}", owner_token[1])
    assert_error(response, 503, "actor_unavailable")
    assert response["Retry-After"] == "5"


def test_usage_with_the_broker_down_still_answers_in_full(
    api: APIClient, owner_token: Token, broker_down: None
) -> None:
    # The meter's snapshot is a read (ADR 0030): it runs on the web's own connection.
    response = api.get("/api/v1/account/usage", **bearer(owner_token[1]))
    assert response.status_code == 200 and response.json()["metered"] is True


@pytest.fixture
def crashing_admin() -> Iterator[None]:
    @capability(name="testCrash", domain="test", description="Crashes.", role="admin")
    def crash(ctx: Context) -> dict[str, Any]:
        raise RuntimeError("driver says: relation secret_table does not exist")

    yield
    unregister("testCrash")


def test_a_crashed_admin_capability_is_audited_as_error(
    api: APIClient, crashing_admin: None, operator: User, operator_raw: str
) -> None:
    response = post_raw(api, "/api/v1/capabilities/testCrash", b"{}", operator_raw)
    error = assert_error(response, 500, "internal_error")
    assert "secret_table" not in json.dumps(error)
    row = AuditEvent.objects.get(action="testCrash")
    assert (row.category, row.result, row.reason) == ("admin", "failure", "error")


def test_api_index_links_schema_docs_and_the_callers_capabilities(
    api: APIClient, owner_token: Token, operator_raw: str
) -> None:
    anonymous = api.get("/api/v1/")
    assert anonymous.status_code == 200
    assert anonymous.json()["links"]["schema"].endswith("/api/v1/schema")
    assert anonymous.json()["links"]["docs"].endswith("/api/v1/docs")
    public = {c["name"] for c in anonymous.json()["capabilities"]}
    assert "whoami" in public and "adminUserUsage" not in public

    mine = api.get("/api/v1/", **bearer(owner_token[1])).json()
    assert mine["authenticated"] is True
    assert {"name": "whoami", "title": "Who am I", "path": "GET /api/v1/whoami"} in (
        mine["capabilities"]
    )
    ops = {c["name"] for c in api.get("/api/v1/", **bearer(operator_raw)).json()["capabilities"]}
    assert "adminUserUsage" in ops


def test_api_docs_load_swagger_from_our_static_files(api: APIClient) -> None:
    page = api.get("/api/v1/docs").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "cdn" not in page.lower()


def test_an_integral_float_is_an_integer_to_every_handler(api, owner_token):  # type: ignore[no-untyped-def]
    """JSON Schema accepts 2.0 for an integer; handlers slicing with it must get an int."""
    from tests.cast import bearer

    for name in ("jobList", "memorySearch", "search"):
        payload = {"limit": 2.0, **({"query": "x"} if "earch" in name else {})}
        response = api.post(
            f"/api/v1/capabilities/{name}", payload, format="json", **bearer(owner_token[1])
        )
        assert response.status_code < 500, (name, response.content)
