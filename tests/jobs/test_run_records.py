"""RunLog's dedicated state: workflow projections (the concurrent_workflows count), the keyed
package-invocation ledger, package run successes and activation milestones — each written by
its owner's RunLog only, invisible to anyone else, and pruned on its own window."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.entitlements.plans import LIMITS, Plan
from apps.entitlements.services import LimitReached
from apps.entitlements.services.counters import count
from apps.jobs.actor import RunLog
from apps.jobs.actor.records import LEDGER_RETENTION, WORKFLOW_RETENTION
from apps.jobs.services import runs
from kody.errors import InvalidInput

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

FREE_WORKFLOWS = LIMITS[Plan.FREE]["concurrent_workflows"]
KEY = {"token_id": "tok-1", "package_id": "pkg-1", "export_name": "main", "idempotency_key": "k1"}


def record(user, surface: str, status: str, package_id: str | None, at=None):  # type: ignore[no-untyped-def]
    at = (at or timezone.now()).isoformat()
    return RunLog.call(
        user.stable_user_id,
        "record",
        {
            "surface": surface,
            "status": status,
            "name": "probe",
            "package_id": package_id,
            "started_at": at,
            "finished_at": at,
        },
    )


def workflow(user, name: str = "nightly-sync", **extra):  # type: ignore[no-untyped-def]
    return runs.start_workflow(
        user.stable_user_id, source_type="package", package_id="pkg-1", workflow_name=name, **extra
    )


def rest(user, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    from apps.accounts.services.tokens import create_token

    raw = create_token(user, "laptop")[1]
    response = APIClient().post(
        f"/api/v1/capabilities/{name}",
        payload or {},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code, response.json()


# --- package run successes and activation milestones ---------------------------------------


def test_package_runs_count_successes_and_reach_milestones_once(owner, frozen_clock):
    first = timezone.now()
    record(owner, "execute", "error", "pkg-1")
    record(owner, "execute", "success", "pkg-1")  # a button press: a success, not activation
    frozen_clock.shift(timedelta(hours=1))
    record(owner, "job", "success", "pkg-2")  # ran on its own: the package is activated
    frozen_clock.shift(timedelta(hours=1))
    record(owner, "webhook", "success", "pkg-1")
    record(owner, "execute", "success", None)  # not a package run
    state = runs.activation(owner.stable_user_id)
    assert state["packageRunSuccesses"] == {"pkg-1": 2, "pkg-2": 1}
    assert state["milestones"] == {
        "package_run_succeeded": {"reachedAt": first.isoformat(), "packageId": "pkg-1"},
        "package_activated": {
            "reachedAt": (first + timedelta(hours=1)).isoformat(),
            "packageId": "pkg-2",
        },
    }


def test_another_users_runs_reach_none_of_the_owners_milestones(owner, outsider):
    record(outsider, "job", "success", "pkg-1")
    assert runs.activation(owner.stable_user_id) == {"milestones": {}, "packageRunSuccesses": {}}
    assert runs.activation(outsider.stable_user_id)["packageRunSuccesses"] == {"pkg-1": 1}


def test_milestones_and_successes_are_exported_and_never_pruned(owner, frozen_clock):
    record(owner, "job", "success", "pkg-1")
    frozen_clock.shift(timedelta(days=400))
    RunLog.call(owner.stable_user_id, "prune")
    assert runs.activation(owner.stable_user_id)["packageRunSuccesses"] == {"pkg-1": 1}
    phases = export_phases(owner)
    assert [r["package_id"] for r in phases["packages"]] == ["pkg-1"]
    milestones = sorted(r["milestone"] for r in phases["milestones"])
    assert milestones == ["package_activated", "package_run_succeeded"]


def export_phases(user) -> dict[str, list]:  # type: ignore[no-untyped-def]
    phases: dict[str, list] = {}
    cursor = None
    while True:
        page = RunLog.call(user.stable_user_id, "export_runs", cursor, 500)
        phases.setdefault(page["phase"], []).extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return phases


# --- workflow projections and concurrent_workflows ----------------------------------------


def test_the_meter_counts_the_owners_active_workflows(owner, outsider):
    one = workflow(owner)
    workflow(owner, "second")
    workflow(outsider)
    assert count(owner.stable_user_id, "concurrent_workflows") == 2
    runs.move_workflow(owner.stable_user_id, one["id"], "running")
    assert count(owner.stable_user_id, "concurrent_workflows") == 2  # running still counts
    runs.move_workflow(owner.stable_user_id, one["id"], "success")
    assert count(owner.stable_user_id, "concurrent_workflows") == 1
    status, body = rest(owner, "workflowRunList")
    assert status == 200 and body["concurrentWorkflows"] == 1
    assert {w["status"] for w in body["workflows"]} == {"success", "queued"}


def test_the_usage_summary_counts_workflows_inside_its_meter_call(owner, outsider, monkeypatch):
    """The summary's concurrent_workflows is RunLog's count, read by the UserMeter's snapshot
    in the same schema (RUN's schema count): no RunLog call of its own."""
    from apps.entitlements.services import usage_summary
    from apps.jobs.actor.runlog import CONCURRENT_WORKFLOWS_SQL

    one = workflow(owner)
    workflow(owner, "second")
    workflow(outsider)
    runs.move_workflow(owner.stable_user_id, one["id"], "success")
    assert "workflow_projections" in CONCURRENT_WORKFLOWS_SQL
    asked: list[str] = []
    real_call = RunLog.call

    def call(user_id, method, *args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(method)
        return real_call(user_id, method, *args, **kwargs)

    monkeypatch.setattr(RunLog, "call", call)
    rows = {r["resource"]: r for r in usage_summary(owner)["resources"]}
    assert (
        rows["concurrent_workflows"]["used"]
        == 1
        == count(owner.stable_user_id, "concurrent_workflows")
    )
    assert asked == ["concurrent_workflows"]  # the count() above, not the summary


def test_the_usage_summary_counts_no_workflows_for_a_user_runlog_never_ran_for(owner, monkeypatch):
    from apps.entitlements.services import usage_summary

    monkeypatch.setattr(RunLog, "call", lambda *a, **k: pytest.fail("RunLog asked"))
    rows = {r["resource"]: r for r in usage_summary(owner)["resources"]}
    assert rows["concurrent_workflows"]["used"] == 0


def test_a_start_past_the_plan_limit_is_refused_and_writes_nothing(owner):
    for n in range(FREE_WORKFLOWS):
        workflow(owner, f"wf-{n}")
    with pytest.raises(LimitReached) as refused:
        workflow(owner, "one-too-many")
    assert refused.value.status == 429
    assert refused.value.details["resource"] == "concurrent_workflows"
    assert len(RunLog.call(owner.stable_user_id, "workflows", None, 50)) == FREE_WORKFLOWS


def test_a_repeated_start_returns_the_first_projection(owner):
    first = workflow(owner, idempotency_key="plan-2031-03-14")
    again = workflow(owner, idempotency_key="plan-2031-03-14")
    assert again["id"] == first["id"]
    assert count(owner.stable_user_id, "concurrent_workflows") == 1


def test_a_terminal_workflow_is_never_moved_again(owner):
    wf = workflow(owner)
    runs.cancel_workflow(owner.stable_user_id, wf["id"])
    late = runs.move_workflow(owner.stable_user_id, wf["id"], "success")
    assert late["status"] == "cancelled"


@pytest.mark.parametrize("bad", [{"source_type": "remote"}, {"workflow_name": ""}])
def test_a_bad_workflow_is_a_coded_4xx(owner, bad):
    with pytest.raises(InvalidInput):
        runs.start_workflow(
            owner.stable_user_id, **{"source_type": "inline", "workflow_name": "x", **bad}
        )
    assert count(owner.stable_user_id, "concurrent_workflows") == 0


def test_an_outsider_can_neither_see_nor_cancel_the_owners_workflow(owner, outsider):
    wf = workflow(owner)
    status, body = rest(outsider, "workflowRunCancel", {"workflowId": wf["id"]})
    assert status == 404 and body["error"]["code"] == "workflow_not_found"
    assert rest(outsider, "workflowRunList")[1] == {"workflows": [], "concurrentWorkflows": 0}
    assert count(owner.stable_user_id, "concurrent_workflows") == 1


def test_the_owner_cancels_their_workflow(owner):
    wf = workflow(owner)
    status, body = rest(owner, "workflowRunCancel", {"workflowId": wf["id"]})
    assert status == 200 and body["status"] == "cancelled"
    assert count(owner.stable_user_id, "concurrent_workflows") == 0


def test_terminal_workflows_are_pruned_after_90_days_active_ones_never(owner, frozen_clock):
    done = workflow(owner, "done")
    runs.move_workflow(owner.stable_user_id, done["id"], "error", "boom")
    stuck = workflow(owner, "still-queued")
    frozen_clock.shift(WORKFLOW_RETENTION - timedelta(minutes=1))
    RunLog.call(owner.stable_user_id, "prune")
    assert len(RunLog.call(owner.stable_user_id, "workflows", None, 50)) == 2
    frozen_clock.shift(timedelta(minutes=2))
    assert RunLog.call(owner.stable_user_id, "prune")["workflows"] == 1
    left = RunLog.call(owner.stable_user_id, "workflows", None, 50)
    assert [w["id"] for w in left] == [stuck["id"]]


# --- the package-invocation ledger --------------------------------------------------------


def test_a_keyed_invocation_runs_once_and_then_replays(owner):
    uid = owner.stable_user_id
    first = runs.begin_invocation(uid, KEY, "hash-a", source="cli")
    assert first["outcome"] == "new"
    assert runs.begin_invocation(uid, KEY, "hash-a")["outcome"] == "in_progress"
    assert runs.finish_invocation(uid, first["id"], "success", {"answer": 42}) is True
    assert runs.finish_invocation(uid, first["id"], "error", None) is False  # once
    again = runs.begin_invocation(uid, KEY, "hash-a")
    assert again == {
        "outcome": "replay",
        "id": first["id"],
        "status": "success",
        "response": {"answer": 42},
    }


def test_a_key_reused_with_another_request_is_a_409(owner):
    uid = owner.stable_user_id
    runs.begin_invocation(uid, KEY, "hash-a")
    with pytest.raises(runs.InvocationKeyReused) as reused:
        runs.begin_invocation(uid, KEY, "hash-b")
    assert reused.value.status == 409


@pytest.mark.parametrize(
    "key", [{**KEY, "idempotency_key": ""}, {k: v for k, v in KEY.items() if k != "token_id"}]
)
def test_a_bad_invocation_key_is_a_coded_4xx_and_writes_nothing(owner, key):
    with pytest.raises(InvalidInput):
        runs.begin_invocation(owner.stable_user_id, key, "hash-a")
    assert export_phases(owner).get("ledger", []) == []


def test_an_invocation_finishes_only_as_success_or_error(owner):
    claimed = runs.begin_invocation(owner.stable_user_id, KEY, "hash-a")
    with pytest.raises(InvalidInput):
        runs.finish_invocation(owner.stable_user_id, claimed["id"], "pending", None)


def test_the_ledger_is_the_owners_alone(owner, outsider):
    mine = runs.begin_invocation(owner.stable_user_id, KEY, "hash-a")
    runs.finish_invocation(owner.stable_user_id, mine["id"], "success", {"secret": "owner"})
    theirs = runs.begin_invocation(outsider.stable_user_id, KEY, "hash-b")
    assert theirs["outcome"] == "new"  # the same key is a different ledger entry
    assert runs.finish_invocation(outsider.stable_user_id, mine["id"], "error", None) is False
    assert runs.begin_invocation(owner.stable_user_id, KEY, "hash-a")["status"] == "success"
    assert [r["id"] for r in export_phases(outsider)["ledger"]] == [theirs["id"]]


def test_ledger_rows_are_pruned_after_90_days(owner, frozen_clock):
    uid = owner.stable_user_id
    done = runs.begin_invocation(uid, KEY, "hash-a")
    runs.finish_invocation(uid, done["id"], "success", None)
    runs.begin_invocation(uid, {**KEY, "idempotency_key": "abandoned"}, "hash-a")
    frozen_clock.shift(timedelta(days=30))
    kept = runs.begin_invocation(uid, {**KEY, "idempotency_key": "recent"}, "hash-a")
    frozen_clock.shift(LEDGER_RETENTION - timedelta(days=30) + timedelta(minutes=1))
    assert RunLog.call(uid, "prune")["ledger"] == 2  # terminal and abandoned-pending alike
    assert [r["id"] for r in export_phases(owner)["ledger"]] == [kept["id"]]
