"""Run records for surfaces: the caller's own RunLog, never anyone else's."""

from __future__ import annotations

from typing import Any

from apps.entitlements.plans import limit_for
from apps.entitlements.services import LimitReached, assert_within, cached_plan
from apps.jobs.actor import RunLog
from apps.jobs.actor.runlog import TRIAGE
from kody.errors import InvalidInput, KodyError, NotFound


class RunNotFound(NotFound):
    code = "run_not_found"
    message = "No run with that id."


class WorkflowNotFound(NotFound):
    code = "workflow_not_found"
    message = "No workflow run with that id."


def record(user_id: str, run: dict[str, Any], lines: list[dict[str, Any]]) -> Any:
    """One finished run (a package export, a webhook delivery) and its log lines."""
    return RunLog.call(user_id, "record", run, lines)


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


# --- writers for the runtime surfaces (workflows, keyed invocations) --------------------------
#
# Who calls these today. The invocation ledger: job runs, for every target capability that
# mutates (``runner._begin_keyed``: the job's occurrence is the key, so a run whose report was
# lost replays instead of mutating twice); keyed package invocations will be the second
# caller once packages run here. Workflow projections (``start_workflow``, ``move_workflow``)
# have NO product caller yet: Kody has no workflow runtime (a job's target is a capability
# call, never a workflow, and nothing else starts one), so in production ``workflowRunList``
# lists nothing and ``concurrent_workflows`` counts 0. They are kept, tested and exported so
# the runtime only has to call them; they are not pretended to be in use.

WORKFLOW_SOURCES = ("package", "inline")


class InvocationKeyReused(KodyError):
    code = "idempotency_key_reused"
    status = 409
    message = "That idempotency key was used with a different request."


def start_workflow(user_id: str, **workflow: Any) -> dict[str, Any]:
    """Project a queued workflow run, refused with ``limit_reached`` at the owner's
    ``concurrent_workflows`` limit (RunLog counts and inserts in one call)."""
    if workflow.get("source_type") not in WORKFLOW_SOURCES or not workflow.get("workflow_name"):
        raise InvalidInput(
            "A workflow names itself and its source (package or inline).",
            details={"sourceType": workflow.get("source_type")},
        )
    limit = limit_for(cached_plan(user_id), "concurrent_workflows")
    started = RunLog.call(user_id, "start_workflow", workflow, limit)
    if started["workflow"] is None:
        assert_within(user_id, "concurrent_workflows")  # raises the standard 429
        raise LimitReached(details={"resource": "concurrent_workflows", "limit": limit})
    return started["workflow"]


def move_workflow(
    user_id: str, workflow_id: str, status: str, error: str | None = None
) -> dict[str, Any]:
    found = RunLog.call(user_id, "move_workflow", workflow_id, status, error)
    if found is None:
        raise WorkflowNotFound(details={"workflowId": workflow_id})
    return found


def begin_invocation(
    user_id: str, key: dict[str, str], request_hash: str, **labels: Any
) -> dict[str, Any]:
    """Claim a keyed package invocation in the owner's ledger: ``new`` (run it, then
    ``finish_invocation``), ``replay`` (the stored response) or ``in_progress``; a key reused
    with another request is a 409."""
    if set(key) != {"token_id", "package_id", "export_name", "idempotency_key"} or not all(
        isinstance(v, str) and v for v in key.values()
    ):
        raise InvalidInput("An invocation key names token, package, export and key.")
    claimed = RunLog.call(user_id, "begin_invocation", key, request_hash, labels)
    if claimed["outcome"] == "mismatch":
        raise InvocationKeyReused(details={"invocationId": claimed["id"]})
    return claimed


def finish_invocation(user_id: str, invocation_id: str, status: str, response: Any) -> bool:
    """Store a pending invocation's outcome; False if it was not pending (or not the owner's)."""
    if status not in ("success", "error"):
        raise InvalidInput(
            "An invocation finishes as success or error.", details={"status": status}
        )
    return bool(RunLog.call(user_id, "finish_invocation", invocation_id, status, response))


def activation(user_id: str) -> dict[str, Any]:
    return RunLog.call(user_id, "activation")
