"""Job operations every surface calls (capabilities, the account UI, admin).

Reads are owner-scoped queries on the public ``jobs`` table; every write goes through the
owner's JobManager (see ``apps/jobs/actor/manager.py``). A job id that is not the caller's is
answered exactly like one that does not exist.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.utils import timezone

from apps.jobs import grants, schedules, targets
from apps.jobs.actor.manager import JobManager
from apps.jobs.models import Job
from kody.capabilities import Context
from kody.capabilities.secrecy import redacted_call
from kody.errors import InvalidInput, NotFound
from kody.fields import new_id

MAX_NAME = 255
LIST_MAX = 100


class JobNotFound(NotFound):
    code = "job_not_found"
    message = "No job with that id."


class JobJson(TypedDict):
    id: str
    name: str
    status: str  # active | paused | stopped (kill switch) | disabled (see disabledReason)
    disabledReason: str | None
    disabledBecause: str | None
    target: dict[str, Any] | None
    schedule: dict[str, Any]
    timezone: str
    enabled: bool
    killSwitch: bool
    preserved: bool
    running: bool
    expiresAt: str | None
    nextRunAt: str | None
    nextRunLocal: str | None
    lastRunAt: str | None
    lastRunStatus: str | None
    retryCount: int
    storageId: str
    createdAt: str


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def as_json(job: Job) -> JobJson:
    local = None
    if job.enabled and job.next_run_at:
        local = job.next_run_at.astimezone(schedules.zone(job.timezone)).isoformat()
    return {
        "id": job.id,
        "name": job.name,
        "status": status_of(job),
        "disabledReason": job.disabled_reason,
        "disabledBecause": grants.describe(job.disabled_reason) or None,
        # Refused when scheduled; redacted here too, for rows older than that refusal.
        "target": redacted_call((job.params_json or {}).get("target")),
        "schedule": job.schedule_json,
        "timezone": job.timezone,
        "enabled": job.enabled,
        "killSwitch": job.kill_switch_enabled,
        "preserved": job.preserved,
        "running": job.claim_token is not None,
        "expiresAt": _iso(job.expires_at),
        "nextRunAt": _iso(job.next_run_at) if job.enabled else None,
        "nextRunLocal": local,
        "lastRunAt": _iso(job.last_run_at),
        "lastRunStatus": job.last_run_status,
        "retryCount": job.retry_count,
        "storageId": job.storage_id,
        "createdAt": job.created_at.isoformat(),
    }


def status_of(job: Job) -> str:
    if job.kill_switch_enabled:
        return "stopped"
    if job.disabled_reason:
        return "disabled"
    return "active" if job.enabled else "paused"


def _expires(value: str | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput("expiresAt must be an ISO 8601 date-time.") from None
    if at.tzinfo is None:
        raise InvalidInput("expiresAt needs a UTC offset.", details={"expiresAt": value})
    if at <= now:
        raise InvalidInput("expiresAt must be in the future.", details={"expiresAt": value})
    return at


def schedule_job(
    ctx: Context,
    *,
    name: str,
    target: dict[str, Any],
    schedule: dict[str, Any],
    tz: str = "UTC",
    expires_at: str | None = None,
    preserved: bool = False,
) -> JobJson:
    now = timezone.now()
    parsed = targets.parse_target(target)
    parsed.check(ctx)
    stored, first = schedules.normalize(schedule, tz, now)
    expires = _expires(expires_at, now)
    # The scheduled_jobs limit is checked by the JobManager's create, atomically with the insert.
    job_id = new_id()
    fields = {
        "id": job_id,
        "name": name.strip()[:MAX_NAME] or "job",
        "source_id": "",
        "storage_id": f"job:{job_id}",
        "params_json": {"target": parsed.as_json()},
        "schedule_json": stored,
        "timezone": tz,
        "caller_context_json": targets.caller_context(ctx),
        "next_run_at": first.isoformat(),
        "expires_at": _iso(expires),
        "preserved": preserved,
    }
    JobManager.call(ctx.user_id, "create", job=fields)
    return get_job(ctx.user_id, job_id)


def owned(user_id: str, job_id: str) -> Job:
    job = Job.objects.filter(id=job_id, user_id=user_id).first()
    if job is None:
        raise JobNotFound(details={"jobId": job_id})
    return job


def get_job(user_id: str, job_id: str) -> JobJson:
    return as_json(owned(user_id, job_id))


def list_jobs(user_id: str, *, cursor: str | None = None, limit: int = 50) -> dict[str, Any]:
    rows = Job.objects.filter(user_id=user_id)
    if cursor:
        rows = rows.filter(id__gt=cursor)
    found = list(rows.order_by("id")[: limit + 1])
    page = found[:limit]
    return {
        "jobs": [as_json(job) for job in page],
        "nextCursor": page[-1].id if len(found) > limit else None,
    }


def update_job(ctx: Context, job_id: str, changes: dict[str, Any]) -> JobJson:
    job = owned(ctx.user_id, job_id)
    now = timezone.now()
    fields: dict[str, Any] = {}
    if "name" in changes:
        fields["name"] = str(changes["name"]).strip()[:MAX_NAME] or job.name
    if "target" in changes:
        parsed = targets.parse_target(changes["target"])
        parsed.check(ctx)
        fields["params_json"] = {**(job.params_json or {}), "target": parsed.as_json()}
        fields["caller_context_json"] = targets.caller_context(ctx)
    if "preserved" in changes:
        fields["preserved"] = bool(changes["preserved"])
    if "expiresAt" in changes:
        fields["expires_at"] = _iso(_expires(changes["expiresAt"], now))
    reschedule = {"schedule", "timezone"} & set(changes) or changes.get("enabled") is True
    if "enabled" in changes:
        fields["enabled"] = bool(changes["enabled"])
    if changes.get("enabled") is True or "target" in changes:
        # Re-enabled or retargeted: from now on the job runs with the grant of this caller,
        # which must itself be allowed to make the job's call.
        current = changes.get("target", (job.params_json or {}).get("target"))
        if current is not None:
            targets.parse_target(current).check(ctx)
        fields["caller_context_json"] = targets.caller_context(ctx)
        fields["disabled_reason"] = None
    if reschedule:
        tz = changes.get("timezone", job.timezone)
        stored, first = schedules.normalize(changes.get("schedule", job.schedule_json), tz, now)
        fields.update(schedule_json=stored, timezone=tz, next_run_at=first.isoformat())
    if fields:
        JobManager.call(ctx.user_id, "update", job_id=job_id, changes=fields)
    return get_job(ctx.user_id, job_id)


def set_enabled(user_id: str, job_id: str, enabled: bool) -> JobJson:
    """Pause or resume (the account UI); resuming skips the runs missed while paused."""
    job = owned(user_id, job_id)
    fields: dict[str, Any] = {"enabled": enabled}
    if enabled:
        if job.disabled_reason:
            # The owner, signed in, takes the job over from the token that lost its grant: it
            # keeps at most the scopes it had, and now answers to the owner's session alone.
            context = {**(job.caller_context_json or {}), "surface": "ui"}
            context.pop("tokenId", None)
            context["principal"] = f"ui:{user_id}"
            fields.update(caller_context_json=context, disabled_reason=None)
        now = timezone.now()
        upcoming = schedules.next_run_at(job.schedule_json, job.timezone, now - timedelta(0, 1))
        if upcoming is None:
            raise InvalidInput("This job has no run left to resume.", details={"jobId": job_id})
        fields["next_run_at"] = upcoming.isoformat()
    JobManager.call(user_id, "update", job_id=job_id, changes=fields)
    return get_job(user_id, job_id)


def delete_job(user_id: str, job_id: str) -> dict[str, Any]:
    owned(user_id, job_id)
    JobManager.call(user_id, "delete", job_id=job_id)
    return {"id": job_id, "deleted": True}


def run_now(user_id: str, job_id: str) -> dict[str, Any]:
    job = owned(user_id, job_id)
    if job.kill_switch_enabled:
        raise InvalidInput("An operator stopped this job.", details={"jobId": job_id})
    queued = JobManager.call(user_id, "run_now", job_id=job_id)
    return {"id": job_id, "queued": bool(queued), "alreadyRunning": not queued}


def count_jobs(user_id: str) -> int:
    return Job.objects.filter(user_id=user_id).count()
