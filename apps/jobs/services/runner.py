"""Running one claimed job occurrence (on the default queue, never on a shard worker).

``run_claimed`` checks the claim is still ours and unexpired (the claim itself charged
``job_runs_per_day``, in the JobManager's transaction), calls the target with the owner's
identity and grant, and reports to the JobManager, which writes the run records and the next
schedule in one transaction. Nothing here holds the
user's actor lock while the target runs: the target may call the user's other actors.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.utils import timezone

from apps.jobs import targets
from apps.jobs.actor.manager import JobManager, Outcome, error_name, failed_outcome
from apps.jobs.models import Job
from kody.errors import KodyError

log = logging.getLogger("apps.jobs")


def run_claimed(user_id: str, job_id: str, claim_token: str) -> dict[str, Any] | None:
    from apps.accounts.models import User

    now = timezone.now()
    job = Job.objects.filter(id=job_id, user_id=user_id, claim_token=claim_token).first()
    if job is None or job.lease_expires_at is None or job.lease_expires_at <= now:
        return None  # someone else holds it now, or it was deleted: not ours to run
    owner = User.objects.filter(stable_user_id=user_id).first()
    if owner is None:
        return None
    outcome = _execute(job, owner, now)
    return JobManager.call(
        user_id, "finish", job_id=job_id, claim_token=claim_token, outcome=outcome
    )


def _execute(job: Job, owner: Any, started: datetime) -> Outcome:
    calls: list[dict[str, Any]] = []
    try:
        target = targets.parse_target((job.params_json or {}).get("target"))
        call_started = timezone.now()
        try:
            target.run(owner, targets.scopes_of(job.caller_context_json or {}))
        except Exception as exc:
            calls.append(_call_record(job, target, call_started, exc))
            raise
        calls.append(_call_record(job, target, call_started, None))
    except KodyError as exc:
        return failed_outcome(started, exc, retryable=exc.status >= 500, calls=calls)
    except Exception as exc:
        log.exception("job %s failed", job.id)
        return failed_outcome(started, exc, retryable=True, calls=calls)
    return {
        "status": "success",
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
        "calls": calls,
        "lines": [{"level": "info", "message": f"called {target.capability}"}],
    }


def _call_record(
    job: Job, target: targets.CapabilityTarget, started: datetime, exc: Exception | None
) -> dict[str, Any]:
    return {
        "surface": "execute",
        "status": "error" if exc else "success",
        "name": target.capability,
        "storage_id": job.storage_id,
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
        "error_name": error_name(exc) if exc else None,
        "error_message": str(exc) if exc else None,
    }


def send_runs(user_id: str, claims: list[dict[str, str]]) -> None:
    """Queue one ``jobs.run_job`` per claim. A claim whose send fails is left to its lease
    (the next alarm reclaims it); if none could be sent the broker is down, and raising lets
    the outbox retry them all soon — nothing went out, so a retry duplicates nothing."""
    from apps.jobs.tasks import run_job  # tasks imports this module

    sent = 0
    for claim in claims:
        try:
            run_job.apply_async((user_id, claim["job_id"], claim["claim_token"]))
            sent += 1
        except Exception:
            log.exception("could not queue job run; its lease will expire and retry")
    if claims and not sent:
        raise RuntimeError("no claimed job run could be queued")


WAKE_BATCH = 500


def wake_due_alarms(now: datetime | None = None) -> int:
    from kody.actors.alarms import cast_alarm, due_alarms

    now = now or timezone.now()
    woken, after = 0, None
    while True:
        due = due_alarms(now, after, WAKE_BATCH)
        for alarm in due:
            cast_alarm(alarm, now)
        woken += len(due)
        if len(due) < WAKE_BATCH:
            return woken
        after = (due[-1].alarm_at, due[-1].user_id)
