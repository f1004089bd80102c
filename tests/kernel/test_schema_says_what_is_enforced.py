"""The OpenAPI document promises what the server enforces, so a client (or schemathesis)
that builds a request from the schema alone is not turned away by a rule it could not see."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token
from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def document(client: Client) -> dict[str, Any]:
    response = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _body(document: dict[str, Any], path: str) -> dict[str, Any]:
    return document["paths"][path]["post"]["requestBody"]


def _input(document: dict[str, Any], name: str) -> dict[str, Any]:
    body = _body(document, f"/api/v1/capabilities/{name}")
    return body["content"]["application/json"]["schema"]


def test_a_body_with_required_fields_is_marked_required(document: dict[str, Any]) -> None:
    assert _body(document, "/api/v1/capabilities/secretSet")["required"] is True
    assert _body(document, "/api/v1/capabilities/jobSchedule")["required"] is True
    # Every field optional: an empty body is a valid call, so the body itself is optional.
    assert not _body(document, "/api/v1/capabilities/secretList").get("required", False)


def test_secret_set_value_is_a_bounded_string(document: dict[str, Any]) -> None:
    value = _input(document, "secretSet")["properties"]["value"]
    assert value["type"] == "string"
    assert value["minLength"] == 1
    assert value["maxLength"] == 16384


def test_interval_minimum_is_in_the_schema(document: dict[str, Any]) -> None:
    schedule = _input(document, "jobSchedule")["properties"]["schedule"]
    interval = next(
        branch
        for branch in schedule["oneOf"]
        if branch["properties"]["type"]["const"] == "interval"
    )
    assert interval["properties"]["everySeconds"]["minimum"] == 60
    assert "everySeconds" in interval["required"]


def test_a_user_scoped_secret_with_a_binding_key_breaks_the_schema(
    client: Client, owner: User
) -> None:
    raw = create_token(owner, "t", enforce_rate_limit=False)[1]
    response = client.post(
        "/api/v1/capabilities/secretDelete",
        {"name": "k", "scope": "user", "bindingKey": "pkg"},
        content_type="application/json",
        **bearer(raw),
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["path"] == "/"


def test_an_over_long_secret_is_refused_without_quoting_it(client: Client, owner: User) -> None:
    raw = create_token(owner, "t", enforce_rate_limit=False)[1]
    secret = "s3cr3t-" + "x" * 16384
    response = client.post(
        "/api/v1/capabilities/secretSet",
        {"name": "k", "value": secret},
        content_type="application/json",
        **bearer(raw),
    )
    assert response.status_code == 422
    [error] = response.json()["error"]["details"]["errors"]
    assert error["path"] == "/value"
    assert "s3cr3t" not in response.content.decode()
