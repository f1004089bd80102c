"""Running claimed job occurrences (on the default queue, never on a shard worker).

One alarm's claims run as one batch, one Celery task (``jobs.run_batch``). A delivery of the
batch first *starts* its claims with one JobManager call (``start``, a compare-and-set under
the user's lock): each claim still its token's, unexpired, and not started by another
delivery is marked started by this one (a fresh id per delivery), its lease renewed if a
backed-up queue ate into it, and only those claims run. So a second delivery of the same
message — Celery redelivers an unacknowledged ``acks_late`` message after a broker restart
or a lost worker, possibly while the first is still running — runs nothing, whatever the
target (mutating targets are also keyed in the invocation ledger, see below). A delivery that
dies leaves its claims started until their leases run out; the alarm then claims them again
with new tokens, which start afresh.

The batch reads its jobs and their owner once and for each started claim (the claim itself
charged ``job_runs_per_day``, in the JobManager's transaction) calls the target with the
owner's identity and grant, and reports to the JobManager with ``finish_many``, which writes
each run's records and next schedule in one transaction: one report for the batch, or one
every ``REPORT_EVERY`` while a long batch is still running. Nothing here holds the user's
actor lock while a target runs: the target may call the user's other actors. The runs of one
batch go one after another, so a job is never run beside itself. A run starts only with at
least ``MIN_LEASE_LEFT`` of its lease ahead of it: when the next one has less (its earlier
runs were slow), the delivery calls ``start`` again for the claims it has left, which renews
them (they are its own), and runs only those answered. A claim whose lease ran out while the
batch waited still starts if the alarm has not claimed it again; one whose
lease runs out during the batch's own runs is left to the alarm.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from datetime import datetime
from typing import Any

from django.utils import timezone

from apps.jobs import targets
from apps.jobs.actor.manager import (
    MIN_LEASE_LEFT,
    JobManager,
    Outcome,
    Report,
    error_name,
    failed_outcome,
    occurrence_key,
)
from apps.jobs.models import Job
from apps.jobs.services import runs
from kody.errors import KodyError
from kody.fields import new_id

log = logging.getLogger("apps.jobs")


# A long batch reports what it has run at least this often (seconds, monotonic).
REPORT_EVERY = 5.0


def run_claimed(user_id: str, job_id: str, claim_token: str) -> dict[str, Any] | None:
    """Run one claim (a batch of one); its ``finish`` answer, or None if it did not run."""
    results = run_batch(user_id, [{"job_id": job_id, "claim_token": claim_token}])
    return results[0] if results else None


def run_batch(user_id: str, claims: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Run one alarm's claims in order and report them; the ``finish`` answers of those that
    ran (a claim that is no longer ours, was deleted, or another delivery of this batch
    started, runs nothing and reports nothing)."""
    from apps.accounts.models import User

    if not claims:
        return []
    delivery = new_id()
    leases = JobManager.call(user_id, "start", claims=claims, delivery=delivery)
    tokens = {claim["job_id"]: claim["claim_token"] for claim in claims}
    jobs = {
        job.id: job
        for job in Job.objects.filter(user_id=user_id, id__in=list(leases))
        if job.claim_token == tokens[job.id]
    }
    owner = User.objects.filter(stable_user_id=user_id).first() if jobs else None
    if owner is None:
        return []
    _set_leases(claims, leases, jobs)
    answers: list[dict[str, Any]] = []
    pending: list[Report] = []
    reported_at = time.monotonic()
    renewed = False
    for index, claim in enumerate(claims):
        job = jobs.get(claim["job_id"])
        if job is None:
            continue  # not ours to run: another delivery's, someone else's, or deleted
        if job.lease_expires_at - timezone.now() < MIN_LEASE_LEFT and not renewed:
            # The earlier runs were slow: start what is left again (it is this delivery's
            # own, so the call renews the short leases), once per batch.
            rest = [c for c in claims[index:] if c["job_id"] in jobs]
            leases = JobManager.call(user_id, "start", claims=rest, delivery=delivery)
            _set_leases(rest, leases, jobs)
            renewed = True
            if job.id not in jobs:
                continue
        now = timezone.now()
        if job.lease_expires_at <= now:
            continue  # over: the next alarm reclaims it
        outcome = _execute(job, owner, now)
        pending.append({"job_id": job.id, "claim_token": claim["claim_token"], "outcome": outcome})
        if time.monotonic() - reported_at >= REPORT_EVERY:
            answers += JobManager.call(user_id, "finish_many", reports=pending)
            pending, reported_at = [], time.monotonic()
    if pending:
        answers += JobManager.call(user_id, "finish_many", reports=pending)
    return answers


def _set_leases(claims: list[dict[str, str]], leases: dict[str, str], jobs: dict[str, Job]) -> None:
    """Apply ``start``'s answer: the leases it gave; a claim it left out is not ours to run."""
    for claim in claims:
        until = leases.get(claim["job_id"])
        if until is None:
            jobs.pop(claim["job_id"], None)
        elif claim["job_id"] in jobs:
            jobs[claim["job_id"]].lease_expires_at = datetime.fromisoformat(until)


def _execute(job: Job, owner: Any, started: datetime) -> Outcome:
    calls: list[dict[str, Any]] = []
    try:
        target = targets.parse_target((job.params_json or {}).get("target"))
        keyed = _begin_keyed(job, target)
        if keyed is not None and keyed["outcome"] == "replay":
            return _replayed(job, target, started, keyed)
        call_started = timezone.now()
        invocation_id = keyed["id"] if keyed else None
        try:
            response = target.run(owner, targets.scopes_of(job.caller_context_json or {}))
        except Exception as exc:
            calls.append(_call_record(job, target, call_started, exc, invocation_id))
            if keyed is not None and not _retryable(exc):
                _finish_keyed(job, keyed, "error", {"error": error_name(exc)})
            raise
        calls.append(_call_record(job, target, call_started, None, invocation_id))
        if keyed is not None:
            _finish_keyed(job, keyed, "success", response)
    except Exception as exc:
        if not isinstance(exc, KodyError):
            log.exception("job %s failed", job.id)
        return failed_outcome(started, exc, retryable=_retryable(exc), calls=calls)
    return {
        "status": "success",
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
        "calls": calls,
        "lines": [{"level": "info", "message": f"called {target.capability}"}],
    }


def _retryable(exc: Exception) -> bool:
    return exc.status >= 500 if isinstance(exc, KodyError) else True


# --- the invocation ledger: a mutating call of an occurrence happens once ----------------------
#
# A job whose target mutates (``Capability.mutates``) keys its call in the owner's invocation
# ledger (RunLog's ``package_invocation_ledger``) by the occurrence: token = the principal that
# scheduled it, package = ``job:{id}`` (the job stands where a package will), export = the
# capability, key = the occurrence key the run record carries. The call's outcome is stored
# right after it returns, before the report: a run whose report was lost (the worker died after
# the call) is reclaimed when its lease runs out and replays the stored outcome instead of
# mutating twice. A retryable failure leaves the row pending, so the retry calls again; so
# does a row still pending when the lease ran out (that call may or may not have happened).


def _begin_keyed(job: Job, target: targets.CapabilityTarget) -> dict[str, Any] | None:
    from kody.capabilities import get

    cap = get(target.capability)
    if cap is None or not cap.mutates or job.claimed_scheduled_for is None:
        return None
    grant = targets.scopes_of(job.caller_context_json or {})
    key = {
        "token_id": (grant.principal_id or f"job:{job.id}")[:64],
        "package_id": f"job:{job.id}",
        "export_name": target.capability,
        "idempotency_key": occurrence_key(job.id, job.claimed_scheduled_for),
    }
    request = json.dumps(target.as_json(), sort_keys=True, separators=(",", ":"))
    request_hash = hashlib.sha256(request.encode()).hexdigest()
    try:
        return runs.begin_invocation(job.user_id, key, request_hash, source="job")
    except runs.InvocationKeyReused:
        # The job's target was edited after this occurrence first ran: call anew, unkeyed.
        return None


def _finish_keyed(job: Job, keyed: dict[str, Any], status: str, response: Any) -> None:
    runs.finish_invocation(job.user_id, keyed["id"], status, response)


def _replayed(
    job: Job, target: targets.CapabilityTarget, started: datetime, keyed: dict[str, Any]
) -> Outcome:
    """The occurrence's call already happened (its report was lost): record, do not repeat."""
    line = {
        "level": "info",
        "message": f"{target.capability} already ran for this occurrence: not called again",
        "fields": {"invocationId": keyed["id"], "status": keyed["status"]},
    }
    outcome: Outcome = {
        "status": "success" if keyed["status"] == "success" else "error",
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
        "calls": [],
        "lines": [line],
        "retryable": False,
    }
    if keyed["status"] != "success":
        outcome["error_name"] = str((keyed.get("response") or {}).get("error", "error"))
        outcome["error_message"] = "The occurrence's call failed before its report was lost."
    return outcome


def _call_record(
    job: Job,
    target: targets.CapabilityTarget,
    started: datetime,
    exc: Exception | None,
    invocation_id: str | None = None,
) -> dict[str, Any]:
    return {
        "surface": "execute",
        "invocation_id": invocation_id,
        "status": "error" if exc else "success",
        "name": target.capability,
        "storage_id": job.storage_id,
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
        "error_name": error_name(exc) if exc else None,
        "error_message": str(exc) if exc else None,
    }


def send_runs(user_id: str, claims: list[dict[str, str]]) -> None:
    """Queue one ``jobs.run_batch`` for the claims. If it cannot be sent the broker is down,
    and raising lets the outbox retry soon — nothing went out, so a retry duplicates
    nothing."""
    from apps.jobs.tasks import run_batch  # tasks imports this module

    if claims:
        run_batch.apply_async((user_id, claims))


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
