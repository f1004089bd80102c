"""Jobs, runs and storage capabilities: always the caller's own, never anyone else's."""

from __future__ import annotations

from typing import Any

from apps.jobs import (
    runtime_capabilities,  # noqa: F401  (registers storage* and runUpdateBulk)
    services,
)
from apps.jobs.actor.models import RUN_STATUSES, RUN_SURFACES
from apps.jobs.actor.runlog import TRIAGE
from apps.jobs.schedules import MAX_INTERVAL_SECONDS, MIN_INTERVAL_SECONDS
from apps.jobs.services import runs, storage
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema
from kody.capabilities.secrecy import TARGET as TARGET_MARK

ID = {"type": "string", "minLength": 1, "maxLength": 512}
CURSOR = cursor_schema(2048, min_length=1)
LIMIT = {"type": "integer", "minimum": 1, "maximum": 100}
# jobList pages by job id, not by an opaque token: any string is a position to continue after.
JOB_CURSOR = {
    "type": "string",
    "minLength": 1,
    "maxLength": 2048,
    "description": "The nextCursor of the previous page (the id of its last job); the list "
    "continues with the jobs after it.",
}
TARGET = {
    "type": "object",
    "description": 'A capability call the caller may make: {"capability": "accountUsage", '
    '"args": {}}, or a published export of one of the caller\'s packages: {"package": '
    '"@scope/name", "export": "default", "args": {}}. It runs with the caller\'s identity, '
    "limits and token scopes, and only while that token is live. A target carrying a secret "
    "value (secretSet, …) is refused.",
    # A stored call: kody.capabilities.secrecy follows it into the target's own schema.
    TARGET_MARK: True,
    "properties": {
        "capability": {"type": "string", "minLength": 1, "maxLength": 64},
        "package": {"type": "string", "minLength": 1, "maxLength": 255},
        "export": {"type": "string", "minLength": 1, "maxLength": 255},
        "args": {"type": "object"},
    },
    "oneOf": [{"required": ["capability"]}, {"required": ["package", "export"]}],
    "additionalProperties": False,
}
# One branch per kind, so that the schema carries the rules the scheduler enforces: a cron
# expression has five fields, an interval is at least a minute (apps.jobs.schedules).
SCHEDULE = {
    "type": "object",
    "description": 'Cron {"type": "cron", "expression": "0 9 * * mon-fri"} (five fields, wall '
    'time in timezone) or interval {"type": "interval", "everySeconds": 3600}.',
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "type": {"const": "cron"},
                "expression": {
                    "type": "string",
                    "maxLength": 200,
                    "pattern": r"^ *[0-9A-Za-z*,/-]+( +[0-9A-Za-z*,/-]+){4} *$",
                },
            },
            "required": ["type", "expression"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "interval"},
                "everySeconds": {
                    "type": "integer",
                    "minimum": MIN_INTERVAL_SECONDS,
                    "maximum": MAX_INTERVAL_SECONDS,
                },
                "anchorAt": {"type": "string", "format": "date-time"},
            },
            "required": ["type", "everySeconds"],
            "additionalProperties": False,
        },
    ],
}
TIMEZONE = {"type": "string", "minLength": 1, "maxLength": 64, "description": "IANA zone."}
NAME = {"type": "string", "minLength": 1, "maxLength": 255}
WHEN = {"type": ["string", "null"], "format": "date-time"}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


JOB_ID = _object({"jobId": ID}, ["jobId"])


@capability(
    name="jobSchedule",
    domain="jobs",
    mutates=True,
    title="Schedule a recurring job",
    description="Schedule a capability call to run on a cron or interval schedule.",
    input_schema=_object(
        {
            "name": NAME,
            "target": TARGET,
            "schedule": SCHEDULE,
            "timezone": TIMEZONE,
            "expiresAt": WHEN,
            "preserved": {"type": "boolean"},
        },
        ["name", "target", "schedule"],
    ),
)
def job_schedule(
    ctx: Context,
    name: str,
    target: dict[str, Any],
    schedule: dict[str, Any],
    timezone: str = "UTC",
    expiresAt: str | None = None,  # noqa: N803
    preserved: bool = False,
) -> dict[str, Any]:
    return dict(
        services.schedule_job(
            ctx,
            name=name,
            target=target,
            schedule=schedule,
            tz=timezone,
            expires_at=expiresAt,
            preserved=preserved,
        )
    )


@capability(
    name="jobScheduleOnce",
    domain="jobs",
    mutates=True,
    title="Schedule a one-off job",
    description="Run a capability call once at runAt (an offset-less time is wall time in "
    "timezone).",
    input_schema=_object(
        {
            "name": NAME,
            "target": TARGET,
            "runAt": {"type": "string", "minLength": 1, "maxLength": 64},
            "timezone": TIMEZONE,
            "preserved": {"type": "boolean"},
        },
        ["name", "target", "runAt"],
    ),
)
def job_schedule_once(
    ctx: Context,
    name: str,
    target: dict[str, Any],
    runAt: str,  # noqa: N803
    timezone: str = "UTC",
    preserved: bool = False,
) -> dict[str, Any]:
    return dict(
        services.schedule_job(
            ctx,
            name=name,
            target=target,
            schedule={"type": "once", "runAt": runAt},
            tz=timezone,
            preserved=preserved,
        )
    )


@capability(
    name="jobGet",
    domain="jobs",
    title="Get a job",
    description="One of the caller's jobs with its next run (UTC and local) and last result.",
    input_schema=JOB_ID,
)
def job_get(ctx: Context, jobId: str) -> dict[str, Any]:  # noqa: N803
    job = dict(services.get_job(ctx.user_id, jobId))
    job["observability"] = runs.job_observability(ctx.user_id, [jobId]).get(jobId)
    return job


@capability(
    name="jobList",
    domain="jobs",
    title="List jobs",
    description="The caller's jobs, a page at a time.",
    input_schema=_object({"cursor": JOB_CURSOR, "limit": LIMIT}, []),
)
def job_list(ctx: Context, cursor: str | None = None, limit: int = 50) -> dict[str, Any]:
    return services.list_jobs(ctx.user_id, cursor=cursor, limit=limit)


@capability(
    name="jobUpdate",
    domain="jobs",
    mutates=True,
    title="Change a job",
    description="Rename, retarget, reschedule, pause/resume (enabled), expire or preserve a job.",
    input_schema=_object(
        {
            "jobId": ID,
            "name": NAME,
            "target": TARGET,
            "schedule": {
                **SCHEDULE,
                "oneOf": [
                    *SCHEDULE["oneOf"],
                    {
                        "type": "object",
                        "properties": {
                            "type": {"const": "once"},
                            "runAt": {"type": "string", "format": "date-time"},
                        },
                        "required": ["type", "runAt"],
                        "additionalProperties": False,
                    },
                ],
            },
            "timezone": TIMEZONE,
            "enabled": {"type": "boolean"},
            "expiresAt": WHEN,
            "preserved": {"type": "boolean"},
        },
        ["jobId"],
    ),
)
def job_update(ctx: Context, jobId: str, **changes: Any) -> dict[str, Any]:  # noqa: N803
    return dict(services.update_job(ctx, jobId, changes))


@capability(
    name="jobDelete",
    domain="jobs",
    mutates=True,
    title="Delete a job",
    description="Delete one of the caller's jobs; its run history stays in the run log.",
    input_schema=JOB_ID,
)
def job_delete(ctx: Context, jobId: str) -> dict[str, Any]:  # noqa: N803
    return services.delete_job(ctx.user_id, jobId)


@capability(
    name="jobRunNow",
    domain="jobs",
    mutates=True,
    title="Run a job now",
    description="Make a job due now (it runs within about a minute); a running job is left be.",
    input_schema=JOB_ID,
)
def job_run_now(ctx: Context, jobId: str) -> dict[str, Any]:  # noqa: N803
    return services.run_now(ctx.user_id, jobId)


@capability(
    name="runGet",
    domain="runs",
    title="Get a run",
    description="One run record of the caller with its log lines.",
    input_schema=_object({"runId": ID}, ["runId"]),
)
def run_get(ctx: Context, runId: str) -> dict[str, Any]:  # noqa: N803
    return runs.get_run(ctx.user_id, runId)


@capability(
    name="runList",
    domain="runs",
    title="List runs",
    description="The caller's run records, newest first, optionally by surface, status or job.",
    input_schema=_object(
        {
            "surface": {"type": "string", "enum": list(RUN_SURFACES)},
            "status": {"type": "string", "enum": list(RUN_STATUSES)},
            "jobId": ID,
            "cursor": CURSOR,
            "limit": LIMIT,
        },
        [],
    ),
)
def run_list(
    ctx: Context,
    surface: str | None = None,
    status: str | None = None,
    jobId: str | None = None,  # noqa: N803
    cursor: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    return runs.list_runs(
        ctx.user_id, surface=surface, status=status, job_id=jobId, cursor=cursor, limit=limit
    )


@capability(
    name="runSummary",
    domain="runs",
    title="Run summary",
    description="Counts of the caller's runs by surface and status over the retention window.",
)
def run_summary(ctx: Context) -> dict[str, Any]:
    return runs.summary(ctx.user_id)


@capability(
    name="runUpdate",
    domain="runs",
    mutates=True,
    title="Triage a run",
    description="Set a run's error triage state and note.",
    input_schema=_object(
        {
            "runId": ID,
            "errorTriage": {"type": ["string", "null"], "enum": [*TRIAGE, None]},
            "triageNote": {"type": ["string", "null"], "maxLength": 2000},
        },
        ["runId"],
    ),
)
def run_update(
    ctx: Context,
    runId: str,  # noqa: N803
    errorTriage: str | None = None,  # noqa: N803
    triageNote: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    return runs.update_run(
        ctx.user_id, runId, triage=errorTriage, note=triageNote, by=ctx.client_id or "account"
    )


@capability(
    name="workflowRunList",
    domain="jobs",
    title="List workflow runs",
    description="The caller's workflow runs and how many count against concurrent_workflows.",
    input_schema=_object(
        {
            "status": {
                "type": "string",
                "enum": ["queued", "running", "success", "error", "cancelled"],
            },
            "limit": LIMIT,
        },
        [],
    ),
)
def workflow_run_list(ctx: Context, status: str | None = None, limit: int = 50) -> dict[str, Any]:
    return runs.workflows(ctx.user_id, status=status, limit=limit)


@capability(
    name="workflowRunCancel",
    domain="jobs",
    mutates=True,
    title="Cancel a workflow run",
    description="Cancel one of the caller's queued or running workflow runs.",
    input_schema=_object({"workflowId": ID}, ["workflowId"]),
)
def workflow_run_cancel(ctx: Context, workflowId: str) -> dict[str, Any]:  # noqa: N803
    return runs.cancel_workflow(ctx.user_id, workflowId)


@capability(
    name="storageExport",
    domain="storage",
    title="Export a storage bucket",
    description="Page through one of the caller's storage buckets (exec:, job:, package:, "
    "service: ids), keys in order.",
    input_schema=_object(
        {
            "storageId": runtime_capabilities.STORAGE_ID,
            "cursor": CURSOR,
            "pageSize": {"type": "integer", "minimum": 1, "maximum": 500},
        },
        ["storageId"],
    ),
)
def storage_export(
    ctx: Context,
    storageId: str,  # noqa: N803
    cursor: str | None = None,
    pageSize: int = 100,  # noqa: N803
) -> dict[str, Any]:
    return storage.export(ctx.user_id, storageId, cursor, pageSize)
