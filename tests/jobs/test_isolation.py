"""Another person can never see, run, edit or delete someone's job, run or storage bucket —
through REST and through MCP alike."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.accounts.services.tokens import authenticate_bearer
from apps.jobs import services
from apps.jobs.actor import RunLog
from apps.jobs.models import Job
from apps.jobs.services import storage
from kody.capabilities import Context, all_capabilities
from kody.errors import KodyError
from kody.mcp import server as mcp

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

USAGE = {"capability": "accountUsage", "args": {}}
COVERED = {
    "jobSchedule",
    "jobScheduleOnce",
    "jobGet",
    "jobList",
    "jobUpdate",
    "jobDelete",
    "jobRunNow",
    "runGet",
    "runList",
    "runSummary",
    "runUpdate",
    "workflowRunList",
    "workflowRunCancel",
    "storageExport",
}


def rest(raw: str, name: str, payload: dict | None = None) -> tuple[int, dict[str, Any]]:
    response = APIClient().post(
        f"/api/v1/capabilities/{name}",
        payload or {},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code, response.json()


def via_mcp(raw: str, name: str, payload: dict | None = None) -> tuple[bool, dict[str, Any]]:
    """The MCP server's own call path (``call_tool`` minus its async thread hop)."""
    token = authenticate_bearer(raw)
    try:
        result = mcp._success_result(mcp._invoke(token.pk, name, payload, None))
    except KodyError as exc:
        result = mcp._error_result(exc)
    return bool(result.is_error), json.loads(result.content[0].text)


@pytest.fixture
def owners_job(owner) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return dict(
        services.schedule_job(
            Context(user=owner),
            name="nightly",
            target=USAGE,
            schedule={"type": "cron", "expression": "0 3 * * *"},
            tz="Europe/Berlin",
        )
    )


@pytest.fixture
def owners_run(owner, owners_job) -> str:  # type: ignore[no-untyped-def]
    return RunLog.call(
        owner.stable_user_id,
        "record",
        {
            "surface": "job",
            "status": "error",
            "name": "nightly",
            "job_id": owners_job["id"],
            "started_at": "2031-01-01T03:00:00+00:00",
            "finished_at": "2031-01-01T03:00:01+00:00",
            "error_name": "Boom",
            "error_message": "secret failure detail",
        },
        [{"level": "error", "message": "owner-only log line"}],
    )


def test_every_jobs_capability_has_an_isolation_test():
    declared = {
        c.name for c in all_capabilities() if c.handler.__module__ == "apps.jobs.capabilities"
    }
    assert declared == COVERED


def test_the_owner_schedules_lists_and_reads_their_job(owner_key):
    status, job = rest(
        owner_key,
        "jobSchedule",
        {
            "name": "hourly",
            "target": USAGE,
            "schedule": {"type": "cron", "expression": "0 * * * *"},
            "timezone": "Asia/Kolkata",
        },
    )
    assert status == 200 and job["nextRunLocal"].endswith("+05:30")
    status, listed = rest(owner_key, "jobList")
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    error, got = via_mcp(owner_key, "jobGet", {"jobId": job["id"]})
    assert not error and got["name"] == "hourly"


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("jobGet", {}),
        ("jobUpdate", {"name": "taken over"}),
        ("jobUpdate", {"enabled": False}),
        ("jobDelete", {}),
        ("jobRunNow", {}),
    ],
)
def test_an_outsider_cannot_touch_the_owners_job(name, extra, owners_job, outsider_key):
    before = Job.objects.get(id=owners_job["id"])
    status, body = rest(outsider_key, name, {"jobId": owners_job["id"], **extra})
    assert status == 404 and body["error"]["code"] == "job_not_found"
    error, mcp_body = via_mcp(outsider_key, name, {"jobId": owners_job["id"], **extra})
    assert error and mcp_body == body  # same envelope as a job that does not exist
    after = Job.objects.get(id=owners_job["id"])
    assert (after.name, after.enabled, after.next_run_at) == (
        before.name,
        before.enabled,
        before.next_run_at,
    )


def test_a_foreign_job_looks_exactly_like_a_missing_one(owners_job, outsider_key):
    foreign = rest(outsider_key, "jobGet", {"jobId": owners_job["id"]})
    missing = rest(outsider_key, "jobGet", {"jobId": "no-such-job"})
    assert foreign[0] == missing[0] == 404
    assert foreign[1]["error"]["code"] == missing[1]["error"]["code"]


def test_an_outsider_lists_no_jobs_and_no_runs(owners_job, owners_run, outsider_key):
    assert rest(outsider_key, "jobList")[1]["jobs"] == []
    assert rest(outsider_key, "runList")[1]["runs"] == []
    assert rest(outsider_key, "runList", {"jobId": owners_job["id"]})[1]["runs"] == []
    assert rest(outsider_key, "runSummary")[1]["total"] == 0
    error, body = via_mcp(outsider_key, "runList", {})
    assert not error and body["runs"] == []


@pytest.mark.parametrize(
    ("name", "extra"), [("runGet", {}), ("runUpdate", {"errorTriage": "ignored"})]
)
def test_an_outsider_cannot_read_or_triage_the_owners_run(
    name, extra, owner, owners_run, outsider_key
):
    status, body = rest(outsider_key, name, {"runId": owners_run, **extra})
    assert status == 404 and "owner-only" not in json.dumps(body)
    error, mcp_body = via_mcp(outsider_key, name, {"runId": owners_run, **extra})
    assert error and mcp_body["error"]["code"] == "run_not_found"
    run = RunLog.call(owner.stable_user_id, "get_run", owners_run)
    assert run["errorTriage"] is None and run["logs"][0]["message"] == "owner-only log line"


def test_the_owner_reads_and_triages_their_run(owners_run, owner_key):
    status, run = rest(owner_key, "runGet", {"runId": owners_run})
    assert status == 200 and run["logs"][0]["message"] == "owner-only log line"
    status, run = rest(owner_key, "runUpdate", {"runId": owners_run, "errorTriage": "fixed"})
    assert status == 200 and run["errorTriage"] == "fixed"
    assert rest(owner_key, "runSummary")[1]["bySurface"]["job"]["error"] == 1


def test_same_storage_id_is_two_buckets_for_two_people(owner, outsider, owner_key, outsider_key):
    storage.put(owner.stable_user_id, "job:shared-name", "k", {"secret": "owner"})
    storage.put(outsider.stable_user_id, "job:shared-name", "k", {"secret": "outsider"})
    _, mine = rest(owner_key, "storageExport", {"storageId": "job:shared-name"})
    _, theirs = rest(outsider_key, "storageExport", {"storageId": "job:shared-name"})
    assert [e["value"] for e in mine["entries"]] == [{"secret": "owner"}]
    assert [e["value"] for e in theirs["entries"]] == [{"secret": "outsider"}]
    storage.delete(outsider.stable_user_id, "job:shared-name", "k")
    assert storage.get(owner.stable_user_id, "job:shared-name", "k")["found"] is True


def test_workflow_runs_are_the_callers_own(owner, owner_key, outsider_key):
    from apps.jobs.actor.models import WorkflowProjection  # noqa: F401 (table exists)

    # No workflow engine writes projections yet; the lists are empty and cancel is a 404.
    assert rest(owner_key, "workflowRunList")[1] == {"workflows": [], "concurrentWorkflows": 0}
    status, body = rest(outsider_key, "workflowRunCancel", {"workflowId": "w-1"})
    assert status == 404 and body["error"]["code"] == "workflow_not_found"
    error, _ = via_mcp(outsider_key, "workflowRunCancel", {"workflowId": "w-1"})
    assert error


def test_a_job_cannot_target_an_operator_capability(operator):
    from apps.accounts.services.tokens import create_token

    raw = create_token(operator, "ops")[1]
    status, body = rest(
        raw,
        "jobSchedule",
        {
            "name": "escalate",
            "target": {"capability": "adminUserUsage", "args": {"userId": "f" * 64}},
            "schedule": {"type": "interval", "everySeconds": 3600},
        },
    )
    assert status == 422 and body["error"]["code"] == "invalid_target"
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "x", "target": USAGE, "schedule": {"type": "cron", "expression": "nope"}},
        {
            "name": "x",
            "target": USAGE,
            "schedule": {"type": "cron", "expression": "* * * * *"},
            "timezone": "Not/AZone",
        },
        {
            "name": "x",
            "target": {"capability": "noSuchThing"},
            "schedule": {"type": "interval", "everySeconds": 600},
        },
        {
            "name": "x",
            "target": {"capability": "accountUsage", "args": {"bogus": 1}},
            "schedule": {"type": "interval", "everySeconds": 600},
        },
    ],
)
def test_bad_input_is_a_coded_4xx_and_writes_nothing(payload, owner_key):
    status, body = rest(owner_key, "jobSchedule", payload)
    assert 400 <= status < 500 and body["error"]["code"] in {
        "invalid_schedule",
        "invalid_target",
        "invalid_input",
    }
    assert not Job.objects.exists()
