from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import create_token, revoke_token
from kody.capabilities import Context, capability, unregister
from kody.errors import AccountDeleting, KodyError
from tests.cast import bearer

# A mutating capability holds a write lease in the caller's UserMeter: actors run inline.
pytestmark = [
    pytest.mark.django_db(databases=["default", "audit"]),
    pytest.mark.usefixtures("inline_actors"),
]

Token = tuple[AccessToken, str]


class LimitReached(KodyError):
    code = "limit_reached"
    status = 429


@pytest.fixture
def throwaway() -> Iterator[None]:
    @capability(name="testLimit", domain="test", description="Over the limit.")
    def limit(ctx: Context) -> dict[str, Any]:
        raise LimitReached("Daily limit reached.")

    @capability(name="testDeleting", domain="test", description="Refused.", mutates=True)
    def deleting(ctx: Context) -> dict[str, Any]:
        raise AccountDeleting()

    @capability(name="testAdmin", domain="test", description="Operators.", role="admin")
    def admin(ctx: Context) -> dict[str, Any]:
        return {"ok": True}

    yield
    for name in ("testLimit", "testDeleting", "testAdmin"):
        unregister(name)


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/capabilities"),
        ("post", "/api/v1/capabilities/whoami"),
        ("get", "/api/v1/whoami"),
        ("get", "/api/v1/tokens"),
    ],
)
def test_every_route_needs_a_token(api: APIClient, method: str, path: str) -> None:
    response = getattr(api, method)(path)
    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header", ["Bearer kody_pat_nope", "Bearer ", "Basic b3duZXI6cGFzcw==", "Token abc"]
)
def test_wrong_credentials_are_refused(api: APIClient, owner_token: Token, header: str) -> None:
    response = api.get("/api/v1/whoami", HTTP_AUTHORIZATION=header)
    assert_error(response, 401, "unauthenticated")


def test_revoked_token_is_refused(api: APIClient, owner_token: Token) -> None:
    token, raw = owner_token
    revoke_token(token.user, token.pk)
    assert_error(api.get("/api/v1/whoami", **bearer(raw)), 401, "unauthenticated")


def test_session_login_does_not_open_the_api(api: APIClient, owner: User) -> None:
    api.force_login(owner)
    assert_error(api.get("/api/v1/whoami"), 401, "unauthenticated")


def test_whoami_answers_the_caller(api: APIClient, owner: User, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.get("/api/v1/whoami", **bearer(raw))

    assert response.status_code == 200
    body = response.json()
    assert body["userId"] == owner.stable_user_id
    assert body["username"] == owner.username and body["role"] == "user"
    assert body["token"] == {"name": "owner laptop", "kind": "pat", "prefix": raw[:13]}


def test_capability_call_matches_the_alias(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    called = api.post("/api/v1/capabilities/whoami", {}, format="json", **bearer(raw))
    aliased = api.get("/api/v1/whoami", **bearer(raw))
    assert called.status_code == 200 and called.json() == aliased.json()


def test_empty_body_counts_as_empty_input(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.post(
        "/api/v1/capabilities/whoami", data=b"", content_type="application/json", **bearer(raw)
    )
    assert response.status_code == 200


def test_list_capabilities_describes_each_one(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.get("/api/v1/capabilities", **bearer(raw))

    assert response.status_code == 200
    by_name = {c["name"]: c for c in response.json()["capabilities"]}
    assert {"whoami", "accessTokenList", "accessTokenRevoke"} <= set(by_name)
    revoke = by_name["accessTokenRevoke"]
    assert revoke["mutates"] is True and revoke["role"] == "user"
    assert revoke["inputSchema"]["required"] == ["tokenId"]


def test_admin_capabilities_are_hidden_and_refused_for_users(
    api: APIClient, throwaway: None, owner_token: Token, operator: User
) -> None:
    _, raw = owner_token
    listed = {
        c["name"] for c in api.get("/api/v1/capabilities", **bearer(raw)).json()["capabilities"]
    }
    assert "testAdmin" not in listed
    assert_error(
        api.post("/api/v1/capabilities/testAdmin", {}, format="json", **bearer(raw)),
        403,
        "forbidden",
    )

    _, operator_raw = create_token(operator, "ops")
    response = api.post("/api/v1/capabilities/testAdmin", {}, format="json", **bearer(operator_raw))
    assert response.status_code == 200 and response.json() == {"ok": True}


def test_unknown_capability_is_404(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    error = assert_error(
        api.post("/api/v1/capabilities/noSuchThing", {}, format="json", **bearer(raw)),
        404,
        "unknown_capability",
    )
    assert error["details"] == {"name": "noSuchThing"}


def test_schema_violations_are_422_with_paths(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.post(
        "/api/v1/capabilities/accessTokenRevoke",
        {"tokenId": "seven", "extra": True},
        format="json",
        **bearer(raw),
    )
    error = assert_error(response, 422, "invalid_input")
    assert {e["path"] for e in error["details"]["errors"]} == {"/", "/tokenId"}


def test_body_must_be_a_json_object(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.post("/api/v1/capabilities/whoami", [1, 2], format="json", **bearer(raw))
    assert_error(response, 422, "invalid_input")


def test_malformed_json_is_400(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.post(
        "/api/v1/capabilities/whoami",
        data=b"{not json",
        content_type="application/json",
        **bearer(raw),
    )
    assert_error(response, 400, "bad_request")


def test_non_json_body_is_415(api: APIClient, owner_token: Token) -> None:
    _, raw = owner_token
    response = api.post("/api/v1/capabilities/whoami", {"a": "b"}, **bearer(raw))
    assert_error(response, 415, "unsupported_media_type")


def test_domain_errors_map_to_their_status(
    api: APIClient, throwaway: None, owner_token: Token
) -> None:
    _, raw = owner_token
    post = lambda name: api.post(  # noqa: E731
        f"/api/v1/capabilities/{name}", {}, format="json", **bearer(raw)
    )
    assert_error(post("testLimit"), 429, "limit_reached")
    assert_error(post("testDeleting"), 409, "account_deleting")


def test_token_list_and_revoke_through_the_api(
    api: APIClient, owner: User, owner_token: Token
) -> None:
    current, raw = owner_token
    other, other_raw = create_token(owner, "other")

    listed = api.get("/api/v1/tokens", **bearer(raw)).json()["tokens"]
    assert [(t["name"], t["current"]) for t in listed] == [("other", False), ("owner laptop", True)]
    assert all("hash" not in key.lower() for t in listed for key in t)

    response = api.post(
        "/api/v1/capabilities/accessTokenRevoke",
        {"tokenId": other.pk},
        format="json",
        **bearer(raw),
    )
    assert response.status_code == 200 and response.json()["revokedAt"]
    assert_error(api.get("/api/v1/whoami", **bearer(other_raw)), 401, "unauthenticated")


def test_openapi_schema_documents_capabilities(api: APIClient) -> None:
    response = api.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    whoami = schema["paths"]["/api/v1/whoami"]["get"]
    assert whoami["operationId"] == "whoami"
    assert (
        "userId"
        in whoami["responses"]["200"]["content"]["application/json"]["schema"]["properties"]
    )
    assert "422" in whoami["responses"]
    revoke = schema["paths"]["/api/v1/capabilities/accessTokenRevoke"]["post"]
    body = revoke["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["tokenId"]
    assert "/api/v1/capabilities" in schema["paths"]


def test_unexpected_errors_still_answer_with_the_error_envelope(
    api: APIClient, owner_token: Token
) -> None:
    @capability(name="testBroken", domain="test", description="A bug.")
    def broken(ctx: Context) -> dict[str, Any]:
        raise RuntimeError("boom")

    try:
        response = api.post(
            "/api/v1/capabilities/testBroken", {}, format="json", **bearer(owner_token[1])
        )
    finally:
        unregister("testBroken")
    error = assert_error(response, 500, "internal_error")
    assert "boom" not in error["message"]
