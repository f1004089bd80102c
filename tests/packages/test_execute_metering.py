"""``execute`` is metered exactly: N calls from 16 concurrent callers charge N, and the plan's
daily limit answers 429 ``limit_reached`` without running the code.

Each call is a real REST request on its own thread and database connection, released
together from a barrier.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from apps.entitlements import services as entitlements
from apps.entitlements.actor import UserMeter
from apps.entitlements.services.enforcement import utc_day

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

CALLERS = 16


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_EXECUTE_WALL_SECONDS = 20.0  # 16 Deno processes share two CPUs here


def execute(raw: str, code: str) -> tuple[int, dict[str, Any]]:
    response = APIClient().post(
        "/api/v1/capabilities/execute",
        {"code": code},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code, response.json()


def together(count: int, raw: str, code: str) -> list[tuple[int, dict[str, Any]]]:
    start = threading.Barrier(count)
    replies: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            start.wait(timeout=30)
            replies[index] = execute(raw, code)
        except Exception as exc:  # noqa: BLE001 - reported as a reply the test refuses
            replies[index] = (0, {"exception": repr(exc)})
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    return replies


def used(user_id: str, resource: str = "execute_calls_per_day") -> int:
    return int(UserMeter.call(user_id, "read", resource=resource, day=utc_day())["count"])


def test_sixteen_concurrent_callers_are_charged_exactly_once_each(owner, owner_token):
    replies = together(CALLERS, owner_token[1], "async () => 7")
    assert [status for status, _ in replies] == [200] * CALLERS, replies
    assert all(body["result"] == 7 for _, body in replies)
    assert used(owner.stable_user_id) == CALLERS


def test_the_plan_limit_answers_429_and_runs_nothing(owner, owner_token):
    uid = owner.stable_user_id
    entitlements.consume(uid, "execute_calls_per_day", 249)  # the free plan allows 250
    marker = "async () => (await kody.valueSet({name: 'ran', value: 'yes'})).value.name"
    status, body = execute(owner_token[1], marker)
    assert status == 200 and body["result"] == "ran"
    status, body = execute(owner_token[1], marker.replace("'ran'", "'again'"))
    assert status == 429 and body["error"]["code"] == "limit_reached"
    assert body["error"]["details"]["resource"] == "execute_calls_per_day"
    assert used(uid) == 250
    names = [
        v["name"]
        for v in APIClient()
        .post(
            "/api/v1/capabilities/valueList",
            {},
            format="json",
            HTTP_AUTHORIZATION=f"Bearer {owner_token[1]}",
        )
        .json()["values"]
    ]
    assert names == ["ran"]  # the refused call's code never ran
