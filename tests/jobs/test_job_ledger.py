"""A job whose target mutates keys its call in the owner's invocation ledger by the occurrence,
so a run whose report was lost replays the stored outcome instead of mutating again; the
ledger row is the owner's alone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from apps.jobs import services
from apps.jobs.actor import RunLog
from apps.jobs.actor.manager import LEASE, JobManager, occurrence_key
from apps.jobs.models import Job
from apps.packages.capabilities import values as value_caps
from kody.capabilities import Context

pytestmark = pytest.mark.django_db

SET = {"capability": "valueSet", "args": {"name": "greeting", "value": "hello"}}
ONCE_A_DAY = {"type": "interval", "everySeconds": 86400}


def ledger(user: Any) -> list[dict[str, Any]]:
    cursor = None
    while True:
        page = RunLog.call(user.stable_user_id, "export_runs", cursor, 500)
        if page["phase"] == "ledger":
            return page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return []


def job_runs(user: Any, job_id: str) -> list[dict[str, Any]]:
    page = RunLog.call(user.stable_user_id, "list_runs", {"job_id": job_id}, None, 50)
    return page["runs"]


def test_a_mutating_jobs_call_is_keyed_by_its_occurrence(owner, outsider, clock, wake):
    job = services.schedule_job(Context(user=owner), name="set", target=SET, schedule=ONCE_A_DAY)
    at = Job.objects.get(id=job["id"]).next_run_at
    clock.move_to(at)
    wake()
    [row] = ledger(owner)
    assert row["idempotency_key"] == occurrence_key(job["id"], at)
    assert row["export_name"] == "valueSet" and row["package_id"] == f"job:{job['id']}"
    assert row["status"] == "success" and row["source"] == "job"
    call = next(r for r in job_runs(owner, job["id"]) if r["surface"] == "execute")
    assert call["status"] == "success"
    assert ledger(outsider) == []  # another user's ledger has none of it


def test_a_read_only_jobs_call_writes_no_ledger_row(owner, clock, wake):
    usage = {"capability": "accountUsage", "args": {}}
    job = services.schedule_job(Context(user=owner), name="u", target=usage, schedule=ONCE_A_DAY)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    wake()
    assert ledger(owner) == []


def test_a_run_whose_report_was_lost_replays_instead_of_mutating_again(
    owner, clock, wake, monkeypatch
):
    calls: list[str] = []
    real = value_caps.values.set_value

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["value"])
        return real(*args, **kwargs)

    monkeypatch.setattr(value_caps.values, "set_value", counted)
    job = services.schedule_job(Context(user=owner), name="set", target=SET, schedule=ONCE_A_DAY)
    start = Job.objects.get(id=job["id"]).next_run_at
    clock.move_to(start)
    with monkeypatch.context() as patch:  # the worker dies after the call, before its report
        patch.setattr(JobManager, "finish_many", lambda self, reports: [])
        wake()
    assert calls == ["hello"] and job_runs(owner, job["id"]) == []
    clock.move_to(start + LEASE + timedelta(seconds=1))
    wake()  # the lease ran out: reclaimed as a retry, which finds the call in the ledger
    assert calls == ["hello"]  # not called again
    [run] = [r for r in job_runs(owner, job["id"]) if r["surface"] == "job"]
    assert run["status"] == "success"
    assert run["metadata"]["scheduledFor"] == start.isoformat()
    detail = RunLog.call(owner.stable_user_id, "get_run", run["id"])
    assert "not called again" in detail["logs"][0]["message"]
    assert [r["status"] for r in ledger(owner)] == ["success"]


def test_a_retryable_failure_leaves_the_key_pending_so_the_retry_calls_again(
    owner, clock, wake, monkeypatch
):
    from kody.errors import KodyError

    class Unavailable(KodyError):
        code = "unavailable"
        status = 503

    attempts: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise Unavailable("try later")
        return {"name": kwargs["name"]}

    monkeypatch.setattr(value_caps.values, "set_value", flaky)
    job = services.schedule_job(Context(user=owner), name="set", target=SET, schedule=ONCE_A_DAY)
    start = Job.objects.get(id=job["id"]).next_run_at
    clock.move_to(start)
    wake()
    assert [r["status"] for r in ledger(owner)] == ["pending"]
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)  # the retry's backoff
    wake()
    assert len(attempts) == 2
    assert [r["status"] for r in ledger(owner)] == ["success"]
    statuses = sorted(r["status"] for r in job_runs(owner, job["id"]) if r["surface"] == "job")
    assert statuses == ["error", "success"]
