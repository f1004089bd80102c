"""An actor outage on a server-rendered page is a 503 with Retry-After, not a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from kody.actors import ActorUnavailable

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def outage(*args: Any, **kwargs: Any) -> Any:
    raise ActorUnavailable()


def test_an_account_page_answers_503_with_retry_after(
    owner_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.accounts.views.usage_summary", outage)
    response = owner_client.get("/account/usage")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert b"actor_unavailable" in response.content and b"Try again" in response.content


def test_a_json_page_answers_the_error_envelope(
    owner_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.entitlements.views.services.usage_summary_json", outage)
    response = owner_client.get("/account/usage.json")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "actor_unavailable"
