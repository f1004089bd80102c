"""A broker or database outage is a typed 503 (``ActorUnavailable``), never a 500, and
``/healthz`` says which of the two is down."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connections
from rest_framework.test import APIClient

from apps.accounts.services.tokens import create_token
from kody.actors import ActorUnavailable
from kody.capabilities import Context, capability, unregister
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

DEAD_BROKER = "redis://127.0.0.1:1/0"


@pytest.fixture
def dead_broker(settings):  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = False
    settings.KODY_ACTOR_REDIS_URL = DEAD_BROKER


def test_call_and_cast_turn_a_broker_outage_into_a_typed_error(dead_broker, owner_id):
    with pytest.raises(ActorUnavailable) as caught:
        Probe.call(owner_id, "whoami", idempotency_key="retry-me", timeout=5)
    assert caught.value.status == 503 and caught.value.code == "actor_unavailable"
    assert caught.value.details["idempotency_key"] == "retry-me"  # retry with it
    with pytest.raises(ActorUnavailable) as caught:
        Probe.cast(owner_id, "bump", idempotency_key="cast-key")
    assert caught.value.details["idempotency_key"] == "cast-key"


def test_an_inline_call_turns_a_database_outage_into_a_typed_error(settings, owner_id, monkeypatch):
    settings.KODY_ACTORS_INLINE = True

    def unreachable(*args: object, **kwargs: object) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr("kody.actors.runtime.execute", unreachable)
    with pytest.raises(ActorUnavailable):
        Probe.call(owner_id, "whoami")


@pytest.fixture
def outage_capability() -> Iterator[None]:
    @capability(name="testActorOutage", domain="test", description="Calls an actor.")
    def outage(ctx: Context) -> dict[str, Any]:
        return Probe.call(ctx.user.stable_user_id, "whoami", timeout=5)

    yield
    unregister("testActorOutage")


def test_the_rest_surface_answers_503_with_retry_after_when_the_broker_is_down(
    dead_broker, outage_capability, owner
):
    raw = create_token(owner, "laptop")[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    response = APIClient().post("/api/v1/capabilities/testActorOutage", {}, format="json", **auth)
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "actor_unavailable"
    assert response["Retry-After"] == "5"


def test_healthz_is_ok_when_database_and_broker_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "audit_database": "ok",
        "broker": "ok",
    }


def test_healthz_is_503_when_the_broker_is_down(client, settings):
    settings.KODY_ACTOR_REDIS_URL = DEAD_BROKER
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "database": "ok",
        "audit_database": "ok",
        "broker": "unavailable",
    }


@pytest.mark.parametrize(("alias", "down"), [("default", "database"), ("audit", "audit_database")])
def test_healthz_names_the_database_that_is_down(client, monkeypatch, alias, down):
    # A socket directory where no server listens: connecting fails as it does when the server
    # is gone (the test's own connections, already open, are untouched).
    monkeypatch.setitem(connections[alias].settings_dict, "HOST", "/nonexistent-kody-socket")
    response = client.get("/healthz")
    assert response.status_code == 503
    expected = {"database": "ok", "audit_database": "ok", "broker": "ok"}
    assert response.json() == {"status": "unavailable", **expected, down: "unavailable"}


def too_many_clients(*args: object, **kwargs: object) -> None:
    """What Postgres answers a connection past ``max_connections``, as Django raises it."""
    import psycopg

    try:
        raise psycopg.errors.TooManyConnections("sorry, too many clients already")
    except psycopg.Error as exc:
        raise OperationalError(str(exc)) from exc


def test_the_api_answers_a_server_out_of_connections_with_503_overloaded(owner, monkeypatch):
    raw = create_token(owner, "laptop")[1]
    monkeypatch.setattr(
        "apps.accounts.services.tokens.BearerBackend.authenticate_bearer", too_many_clients
    )
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    response = APIClient().post("/api/v1/capabilities/whoami", {}, format="json", **auth)
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "overloaded"
    assert response["Retry-After"] == "2"


def test_a_page_whose_middleware_meets_the_outage_answers_503_not_500(owner_client, monkeypatch):
    # The account gate reads the signed-in person before any view runs: Django would turn
    # an exception there into a 500 before a view's error handling could see it.
    monkeypatch.setattr("apps.accounts.middleware.policy.may_sign_in", too_many_clients)
    owner_client.raise_request_exception = False
    response = owner_client.get("/account/email")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert b"overloaded" in response.content


def test_a_page_whose_view_meets_a_broker_outage_answers_503_broker_unavailable(
    owner_client, monkeypatch
):
    import redis

    def refused(*args: object, **kwargs: object) -> None:
        raise redis.exceptions.ConnectionError("Connection refused")

    monkeypatch.setattr("apps.mailbox.views.reads.list_messages", refused)
    owner_client.raise_request_exception = False
    response = owner_client.get("/account/email")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert b"broker_unavailable" in response.content


def test_a_bug_stays_a_500(owner_client, monkeypatch):
    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug, not an outage")

    monkeypatch.setattr("apps.mailbox.views.reads.list_messages", broken)
    owner_client.raise_request_exception = False
    assert owner_client.get("/account/email").status_code == 500
