"""Each process borrows database connections from a bounded pool; a shard consumer's thread
does not (its close must end its session); the web process admits no more requests than the
pool has connections and refuses the rest with a coded 503 (ADR 0048)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from kody.admission import AdmissionMiddleware
from kody.dbpool import without_pool

pytestmark = pytest.mark.django_db(transaction=True)


def in_a_thread(work: Callable[[], Any]) -> Any:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    thread.join(timeout=30)
    return result[0]


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def listed(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return bool(cursor.fetchone()[0])


def gone(pid: int) -> bool:
    """The session has ended (a backend leaves pg_stat_activity moments after its close)."""
    deadline = time.monotonic() + 5
    while listed(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_every_database_is_pooled_with_the_configured_bound() -> None:
    for alias in ("default", "audit"):
        options = connections[alias].settings_dict["OPTIONS"]["pool"]
        assert options["max_size"] == settings.KODY_DB_POOL_SIZE
        assert options["timeout"] == settings.KODY_DB_POOL_TIMEOUT
        assert options["min_size"] == 0
        assert connections[alias].settings_dict["CONN_MAX_AGE"] == 0


def test_a_pooled_close_keeps_the_session_for_the_next_borrower() -> None:
    def borrow_and_return() -> int:
        pid = backend_pid()
        connection.close()
        return pid

    pid = in_a_thread(borrow_and_return)
    assert listed(pid)


def test_a_shard_consumer_thread_connects_directly_and_its_close_ends_the_session() -> None:
    def consume_then_recycle() -> tuple[int, int, bool]:
        without_pool()
        first = backend_pid()
        connection.close()
        second = backend_pid()
        pooled = connections["default"].pool is not None
        connection.close()
        return first, second, pooled

    first, second, pooled = in_a_thread(consume_then_recycle)
    assert not pooled
    assert first != second
    assert gone(first) and gone(second)
    # Only that thread changed: this one still borrows from the pool.
    assert connections["default"].pool is not None


class Held:
    """What lies behind the door: answers once released, so a test controls who is inside."""

    def __init__(self) -> None:
        self.inside = 0
        self.release = asyncio.Event()

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        self.inside += 1
        await self.release.wait()
        return HttpResponse("ok")


def door(held: Held, settings: Any, places: int, wait: float) -> AdmissionMiddleware:
    settings.KODY_DB_POOL_SIZE = places
    settings.KODY_DB_POOL_TIMEOUT = wait
    return AdmissionMiddleware(held.__call__)  # a coroutine function, as Django passes


def get(path: str, accept: str = "application/json") -> HttpRequest:
    return RequestFactory().get(path, HTTP_ACCEPT=accept)


def test_the_door_admits_as_many_requests_as_places_and_refuses_the_rest_with_a_code(
    settings: Any,
) -> None:
    async def scenario() -> tuple[list[HttpResponse], HttpResponse, int]:
        held = Held()
        entrance = door(held, settings, places=2, wait=0.3)
        inside = [asyncio.create_task(entrance(get("/api/v1/whoami"))) for _ in range(2)]
        await asyncio.sleep(0.05)
        refused = await entrance(get("/api/v1/whoami"))
        # A health probe is never held back, even with every place taken.
        probe = asyncio.create_task(entrance(get("/healthz")))
        await asyncio.sleep(0.05)
        entered = held.inside
        held.release.set()
        return [*await asyncio.gather(*inside), await probe], refused, entered

    answered, refused, entered = asyncio.run(scenario())
    assert entered == 3  # two callers and the probe
    assert [each.status_code for each in answered] == [200, 200, 200]
    assert refused.status_code == 503
    assert refused["Retry-After"] == "2"
    assert json.loads(refused.content)["error"]["code"] == "overloaded"


def test_a_waiting_request_enters_once_a_place_frees(settings: Any) -> None:
    async def scenario() -> list[int]:
        held = Held()
        entrance = door(held, settings, places=1, wait=5)
        first = asyncio.create_task(entrance(get("/account")))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(entrance(get("/account")))
        await asyncio.sleep(0.05)
        assert held.inside == 1  # the second waits at the door, not inside
        held.release.set()
        return [each.status_code for each in await asyncio.gather(first, second)]

    assert asyncio.run(scenario()) == [200, 200]


def test_a_refused_page_request_gets_a_page_that_names_the_code(settings: Any) -> None:
    async def scenario() -> HttpResponse:
        held = Held()
        entrance = door(held, settings, places=1, wait=0.1)
        first = asyncio.create_task(entrance(get("/account", accept="text/html")))
        await asyncio.sleep(0.05)
        refused = await entrance(get("/account", accept="text/html"))
        held.release.set()
        await first
        return refused

    refused = asyncio.run(scenario())
    assert refused.status_code == 503
    assert refused["Content-Type"].startswith("text/html")
    assert b"overloaded" in refused.content


def test_under_wsgi_the_door_stands_open(settings: Any) -> None:
    entrance = door(Held(), settings, places=1, wait=0.1)
    sync_entrance = AdmissionMiddleware(lambda request: HttpResponse("ok"))
    assert entrance.async_mode and not sync_entrance.async_mode
    assert [sync_entrance(get("/account")).status_code for _ in range(3)] == [200, 200, 200]
