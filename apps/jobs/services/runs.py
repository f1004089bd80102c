"""Run records for surfaces: the caller's own RunLog, never anyone else's."""

from __future__ import annotations

from typing import Any

from apps.jobs.actor import RunLog
from apps.jobs.actor.runlog import TRIAGE
from kody.errors import InvalidInput, NotFound


class RunNotFound(NotFound):
    code = "run_not_found"
    message = "No run with that id."


class WorkflowNotFound(NotFound):
    code = "workflow_not_found"
    message = "No workflow run with that id."


def get_run(user_id: str, run_id: str) -> dict[str, Any]:
    found = RunLog.call(user_id, "get_run", run_id)
    if found is None:
        raise RunNotFound(details={"runId": run_id})
    return found


def list_runs(
    user_id: str,
    *,
    surface: str | None = None,
    status: str | None = None,
    job_id: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    filters = {"surface": surface, "status": status, "job_id": job_id}
    try:
        return RunLog.call(
            user_id, "list_runs", {k: v for k, v in filters.items() if v}, cursor, limit
        )
    except ValueError:
        raise InvalidInput("That cursor is not one this list gave out.") from None


def summary(user_id: str) -> dict[str, Any]:
    return RunLog.call(user_id, "summary")


def update_run(
    user_id: str, run_id: str, *, triage: str | None, note: str | None, by: str
) -> dict[str, Any]:
    if triage is not None and triage not in TRIAGE:
        raise InvalidInput("Unknown triage state.", details={"errorTriage": triage})
    if not RunLog.call(user_id, "triage", run_id, triage, note, by):
        raise RunNotFound(details={"runId": run_id})
    return get_run(user_id, run_id)


def workflows(user_id: str, *, status: str | None = None, limit: int = 50) -> dict[str, Any]:
    return {
        "workflows": RunLog.call(user_id, "workflows", status, limit),
        "concurrentWorkflows": RunLog.call(user_id, "concurrent_workflows"),
    }


def cancel_workflow(user_id: str, workflow_id: str) -> dict[str, Any]:
    found = RunLog.call(user_id, "cancel_workflow", workflow_id)
    if found is None:
        raise WorkflowNotFound(details={"workflowId": workflow_id})
    return found


def job_observability(user_id: str, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not job_ids:
        return {}
    return RunLog.call(user_id, "job_observability", job_ids)


def concurrent_workflows(user_id: str) -> int:
    return int(RunLog.call(user_id, "concurrent_workflows"))
