"""The database goes away under a live server: every surface says so with a coded 503 and
``Retry-After``, ``/healthz`` names what is down, nothing acknowledged is lost, and the
server recovers by itself once the database is back.

The server (uvicorn, config.asgi) reaches Postgres only through a ``Cable`` (tests/kernel/
live.py) that the test cuts: connections drop mid-query and new ones are refused, as when
Postgres is killed, while the test itself keeps its own direct connection to check what was
stored.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.test import Client

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token
from apps.packages.models import ValueEntry
from tests.accounts.factories import UserFactory
from tests.kernel.live import Cable, database_url, postgres_socket, serve

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

INBOUND_SECRET = "outage-test-secret"
# Short, so a request during the outage gives up on the pool quickly.
POOL_TIMEOUT = "1"
OUTAGE_CODES = {"database_unavailable", "actor_unavailable", "overloaded"}


@pytest.fixture
def cable() -> Iterator[Cable]:
    cable = Cable(postgres_socket())
    cable.mend()
    yield cable
    cable.cut()


@pytest.fixture
def owner() -> User:
    # A fresh stable id: an earlier test limited to some apps may have left the cast's
    # registry rows behind (their schemas dropped), which the server would trip over.
    return UserFactory(username=f"outage-{secrets.token_hex(6)}")


@pytest.fixture
def server(cable: Cable, user_schemas_cleanup: None, tmp_path: Path) -> Iterator[str]:
    env = {
        "DATABASE_URL": database_url("default", port=cable.port),
        "AUDIT_DATABASE_URL": database_url("audit", port=cable.port),
        "KODY_DB_POOL_TIMEOUT": POOL_TIMEOUT,
        "KODY_INBOUND_EMAIL_SECRET": INBOUND_SECRET,
    }
    with serve(env, tmp_path / "server.log") as url:
        yield url


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def value_set(url: str, raw: str, name: str, timeout: float = 30) -> httpx2.Response:
    return httpx2.post(
        f"{url}/api/v1/capabilities/valueSet",
        json={"name": name, "value": f"v-{name}"},
        headers=bearer(raw),
        timeout=timeout,
    )


def assert_coded_503(response: httpx2.Response, code: str) -> dict[str, Any]:
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) > 0
    error = response.json()["error"]
    assert error["code"] == code
    return error


def mcp_initialize(url: str, raw: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "outage-test", "version": "1"},
        },
    }
    headers = {**bearer(raw), "Accept": "application/json, text/event-stream"}
    return httpx2.post(f"{url}/mcp", json=body, headers=headers, timeout=30)


def inbound(url: str, owner: User, delivery_id: str) -> httpx2.Response:
    raw = b"From: a@example.com\r\nTo: x\r\nSubject: hello\r\n\r\nbody\r\n"
    return httpx2.post(
        f"{url}/inbound/email",
        params={"to": f"{owner.username}@mail.localhost", "deliveryId": delivery_id},
        content=raw,
        headers={"X-Kody-Inbound-Secret": INBOUND_SECRET},
        timeout=30,
    )


def wait_until_healthy(url: str, seconds: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if httpx2.get(f"{url}/healthz", timeout=10).status_code == 200:
            return time.monotonic() - started
        time.sleep(0.25)
    raise AssertionError(f"not healthy {seconds}s after the database came back")


def test_every_surface_answers_a_coded_503_while_the_database_is_away(
    server: str, cable: Cable, owner: User
) -> None:
    raw = create_token(owner, "laptop")[1]
    browser = Client()
    browser.force_login(owner)
    cookies = {"sessionid": browser.cookies["sessionid"].value}
    # Everything works while the database is there, so each 503 below is the outage's.
    first = value_set(server, raw, "before")
    assert first.status_code == 200, first.text
    assert mcp_initialize(server, raw).status_code == 200
    page = httpx2.get(f"{server}/account/email", cookies=cookies, timeout=30)
    assert page.status_code == 200, page.text
    assert inbound(server, owner, "before").json()["status"] == "received"

    cable.cut()

    assert_coded_503(value_set(server, raw, "during"), "database_unavailable")
    assert_coded_503(mcp_initialize(server, raw), "database_unavailable")
    page = httpx2.get(f"{server}/account/email", cookies=cookies, timeout=30)
    assert page.status_code == 503 and int(page.headers["Retry-After"]) > 0
    assert "database_unavailable" in page.text
    error = assert_coded_503(inbound(server, owner, "during"), "inbound_retry")
    assert error["details"]["reason"] == "database_unavailable"
    health = httpx2.get(f"{server}/healthz", timeout=30)
    assert health.status_code == 503
    assert health.json() == {
        "status": "unavailable",
        "database": "unavailable",
        "audit_database": "unavailable",
        "broker": "ok",
    }

    cable.mend()

    wait_until_healthy(server, 30)
    assert value_set(server, raw, "after").status_code == 200
    assert mcp_initialize(server, raw).status_code == 200
    assert httpx2.get(f"{server}/account/email", cookies=cookies, timeout=30).status_code == 200
    assert inbound(server, owner, "during").json()["status"] == "received"
    names = set(
        ValueEntry.objects.filter(bucket__user_id=owner.stable_user_id).values_list(
            "name", flat=True
        )
    )
    assert names == {"before", "after"}


class Writer(threading.Thread):
    """Saves values one after another, remembering every answer."""

    def __init__(self, url: str, raw: str, prefix: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.raw, self.prefix, self.stop = url, raw, prefix, stop
        self.answers: list[tuple[str, int, dict[str, Any], str | None]] = []
        self.crashed: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop.is_set():
                n += 1
                name = f"{self.prefix}-{n}"
                response = value_set(self.url, self.raw, name)
                self.answers.append(
                    (
                        name,
                        response.status_code,
                        response.json(),
                        response.headers.get("Retry-After"),
                    )
                )
        except BaseException as exc:
            self.crashed = exc


def test_a_burst_of_writes_across_an_outage_keeps_every_acknowledged_write(
    server: str, cable: Cable, owner: User
) -> None:
    raw = create_token(owner, "burst")[1]
    assert value_set(server, raw, "warm-up").status_code == 200
    stop = threading.Event()
    writers = [Writer(server, raw, f"w{i}", stop) for i in range(8)]
    for writer in writers:
        writer.start()
    time.sleep(2)
    cable.cut()
    time.sleep(3)
    cable.mend()
    recovered_in = wait_until_healthy(server, 30)
    time.sleep(2)
    stop.set()
    for writer in writers:
        writer.join(timeout=60)
        assert writer.crashed is None, writer.crashed

    answers = [answer for writer in writers for answer in writer.answers]
    for name, status, body, retry_after in answers:
        assert status in (200, 503), (name, status, body)
        if status == 503:
            # The write lease (an inline actor call) meets the outage as actor_unavailable.
            assert body["error"]["code"] in OUTAGE_CODES, body
            assert retry_after and int(retry_after) > 0
    acknowledged = {name for name, status, *_ in answers if status == 200}
    stored = dict(
        ValueEntry.objects.filter(bucket__user_id=owner.stable_user_id).values_list("name", "value")
    )
    assert {name: stored.get(name) for name in acknowledged} == {
        name: f"v-{name}" for name in acknowledged
    }
    refused = [name for name, status, *_ in answers if status == 503]
    assert refused, "the outage was never seen"
    # Recovered by itself: every writer's last answers came after the cable was mended.
    assert recovered_in < 30
    assert all(writer.answers[-1][1] == 200 for writer in writers)
