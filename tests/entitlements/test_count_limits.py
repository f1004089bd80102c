"""Count limits hold under concurrency: parallel calls never pass a plan's count together.

Each call below is a real REST request on its own thread and its own database connection,
released together from a barrier, against the free plan (5 scheduled jobs, 25 secrets).
Counting and then inserting let 20 parallel ``jobSchedule`` calls make 8 jobs, and the secrets
limit was not checked at all (30 of 25 saved).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from apps.entitlements.services import LimitReached, count_limit
from apps.jobs.models import Job
from apps.packages.models import SavedPackage, SecretEntry
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

USAGE = {"capability": "accountUsage", "args": {}}


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True


def call(raw: str, name: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = APIClient().post(
        f"/api/v1/capabilities/{name}", payload, format="json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    return response.status_code, response.json()


def together(calls: list[Callable[[], tuple[int, dict[str, Any]]]]) -> list[tuple[int, dict]]:
    """Run every call on its own thread, all released at once; their (status, body)."""
    start = threading.Barrier(len(calls))
    replies: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            start.wait(timeout=30)
            replies[index] = calls[index]()
        except Exception as exc:  # noqa: BLE001 - reported as a reply the test will refuse
            replies[index] = (0, {"exception": repr(exc)})
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return replies


def statuses(replies: list[tuple[int, dict]]) -> dict[int, int]:
    counted: dict[int, int] = {}
    for status, _ in replies:
        counted[status] = counted.get(status, 0) + 1
    return counted


def test_twenty_parallel_job_schedules_make_exactly_the_five_a_free_plan_allows(owner, owner_token):
    raw = owner_token[1]
    replies = together(
        [
            lambda n=n: call(
                raw,
                "jobSchedule",
                {
                    "name": f"usage {n}",
                    "target": USAGE,
                    "schedule": {"type": "cron", "expression": "0 9 * * *"},
                },
            )
            for n in range(20)
        ]
    )
    assert statuses(replies) == {200: 5, 429: 15}, replies
    refused = [body for status, body in replies if status == 429]
    assert {body["error"]["code"] for body in refused} == {"limit_reached"}
    assert refused[0]["error"]["details"]["resource"] == "scheduled_jobs"
    assert refused[0]["error"]["details"]["limit"] == 5
    assert Job.objects.filter(user_id=owner.stable_user_id).count() == 5


def test_thirty_parallel_secret_saves_keep_exactly_the_twenty_five_a_free_plan_allows(
    owner, owner_token
):
    raw = owner_token[1]
    replies = together(
        [
            lambda n=n: call(raw, "secretSet", {"name": f"KEY_{n}", "value": f"v-{n}-secret"})
            for n in range(30)
        ]
    )
    assert statuses(replies) == {200: 25, 429: 5}, replies
    refused = [body for status, body in replies if status == 429]
    assert {body["error"]["details"]["resource"] for body in refused} == {"secrets"}
    assert SecretEntry.objects.filter(bucket__user_id=owner.stable_user_id).count() == 25
    assert not any("-secret" in str(body) for _, body in replies)  # no value echoed


def test_replacing_a_secret_at_the_limit_is_not_a_new_one(owner, owner_token):
    raw = owner_token[1]
    for n in range(25):
        assert call(raw, "secretSet", {"name": f"KEY_{n}", "value": "x"})[0] == 200
    assert call(raw, "secretSet", {"name": "KEY_3", "value": "rotated"})[0] == 200
    status, body = call(raw, "secretSet", {"name": "KEY_25", "value": "one too many"})
    assert status == 429 and body["error"]["code"] == "limit_reached"
    # A batch that would pass the limit saves none of it.
    status, _ = call(
        raw,
        "secretSetMany",
        {"secrets": [{"name": "KEY_3", "value": "again"}, {"name": "NEW", "value": "n"}]},
    )
    assert status == 429
    assert SecretEntry.objects.filter(bucket__user_id=owner.stable_user_id).count() == 25
    assert not SecretEntry.objects.filter(name="NEW").exists()


def test_the_owners_full_quota_does_not_count_against_someone_else(
    owner, owner_token, outsider, outsider_token
):
    for n in range(25):
        assert call(owner_token[1], "secretSet", {"name": f"K{n}", "value": "x"})[0] == 200
    assert call(owner_token[1], "secretSet", {"name": "K25", "value": "x"})[0] == 429
    assert call(outsider_token[1], "secretSet", {"name": "K0", "value": "x"})[0] == 200
    assert SecretEntry.objects.filter(bucket__user_id=outsider.stable_user_id).count() == 1


def test_saved_package_writers_holding_a_slot_stop_at_the_plans_fifteen(owner):
    """Nothing saves packages yet; the writer that will (like the repo writers) takes the same
    slot, and twenty of them racing keep exactly the free plan's fifteen."""

    def save(n: int) -> tuple[int, dict[str, Any]]:
        try:
            with count_limit(owner, "saved_packages") as slot:
                slot.take()
                SavedPackageFactory(
                    user_id=owner.stable_user_id,
                    name=f"pkg-{n}",
                    kody_id=f"@ada/pkg-{n}",
                    source_id=f"src-race-{n}",
                )
        except LimitReached as exc:
            return exc.status, {"code": exc.code}
        return 200, {}

    replies = together([lambda n=n: save(n) for n in range(20)])
    assert statuses(replies) == {200: 15, 429: 5}, replies
    assert SavedPackage.objects.filter(user_id=owner.stable_user_id).count() == 15


def test_a_daily_resource_is_not_a_count_limit(owner):
    with pytest.raises(ValueError), count_limit(owner, "job_runs_per_day"):
        pass
