"""What a JobManager's claims are made of: the leases and retry rules, the shapes of a claim,
an outcome and a report, and the writes the scheduler makes to many job rows at once."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.utils import timezone

from apps.jobs.models import KILL_SWITCH_KEY, Job, JobsWorkerState
from kody.errors import KodyError
from kody.outbox.core import CLAIM_LEASE

# Longer than any single capability call may take (actor calls time out after 30 s), short
# enough that a killed worker delays an every-minute job by about two occurrences
# (``KODY_JOB_LEASE_SECONDS``, 120; read once per process).
LEASE = timedelta(seconds=settings.KODY_JOB_LEASE_SECONDS)
if not timedelta(0) < LEASE < CLAIM_LEASE:  # see DISPATCH_TASK: a repeat must find it expired
    raise ImproperlyConfigured("KODY_JOB_LEASE_SECONDS must be above 0 and below 300")
# Occurrences missed (worker or beat down) run late, in order, once each; older ones are
# skipped so a long outage does not turn into a storm of catch-up runs.
CATCH_UP = timedelta(minutes=15)
MAX_RETRIES = 3
RETRY_BASE = timedelta(seconds=30)
# A run starts only with this much of its lease ahead (60 s of the default 120: twice the
# 30 s an actor call may take); ``start`` renews a lease with less.
MIN_LEASE_LEFT = LEASE / 2
BACKLOG_REARM = timedelta(seconds=1)
KILLED_POLL = timedelta(minutes=1)
# The outbox task that queues claimed runs (``apps.jobs.tasks.dispatch_runs``). The outbox
# relays at least once, but a message that was sent repeats only after the outbox's claim
# lease (its relay died before deleting it), by when this occurrence's LEASE has run out and
# ``run_claimed`` refuses it: a repeat never runs a job twice concurrently
# (tests/jobs/test_scheduler.py checks the two leases' order). A send that failed outright
# sent nothing, so its quick retry repeats nothing.
DISPATCH_TASK = "jobs.dispatch_runs"


# What a claim writes to its job row.
CLAIM_FIELDS = [
    "claim_token",
    "running_since",
    "lease_expires_at",
    "started_by",
    "claimed_scheduled_for",
    "retry_count",
]
# What finishing (or retrying) an occurrence writes to its job row.
REPORT_FIELDS = [
    "claim_token",
    "running_since",
    "lease_expires_at",
    "started_by",
    "claimed_scheduled_for",
    "retry_count",
    "retry_scheduled_for",
    "next_run_at",
    "enabled",
    "last_run_at",
    "last_run_status",
    "last_completed_scheduled_for",
    "disabled_reason",
    "updated_at",
]


class Claim(TypedDict):
    job_id: str
    claim_token: str


class Outcome(TypedDict, total=False):
    status: str  # success | error | skipped (the grant refused it: apps.jobs.grants)
    skip_reason: str
    started_at: str
    finished_at: str
    error_name: str | None
    error_message: str | None
    retryable: bool
    calls: list[dict[str, Any]]  # capability calls the run made: run-record fields
    lines: list[dict[str, Any]]


class Report(TypedDict):
    job_id: str
    claim_token: str
    outcome: Outcome


def error_name(exc: Exception) -> str:
    return exc.code if isinstance(exc, KodyError) else type(exc).__name__


def failed_outcome(
    started: datetime,
    exc: Exception,
    *,
    retryable: bool,
    calls: list[dict[str, Any]] | None = None,
) -> Outcome:
    return {
        "status": "error",
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
        "error_name": error_name(exc),
        "error_message": str(exc)[:1000],
        "retryable": retryable,
        "calls": calls or [],
        "lines": [{"level": "error", "message": f"{error_name(exc)}: {str(exc)[:500]}"}],
    }


def max_due_per_alarm() -> int:
    return int(getattr(settings, "KODY_MAX_DUE_JOBS_PER_ALARM", 25))


def occurrence_key(job_id: str, scheduled_for: datetime) -> str:
    return f"job:{job_id}:{scheduled_for.isoformat()}"


def retry_delay(attempt: int) -> timedelta:
    return RETRY_BASE * (2 ** max(0, attempt - 1))


def _write_rows(jobs: list[Job], fields: list[str]) -> int:
    """``bulk_update`` in one plain ``UPDATE … FROM (VALUES …)``: Django's CASE-per-field form
    cost more CPU in the shard worker than every other statement of a batch together. Answers
    how many bytes the rows grew (``octet_length(row::text)`` after less before, both in the
    one statement: its snapshot shows the rows as they were) for the storage meter."""
    if not jobs:
        return 0
    columns = [Job._meta.get_field(name) for name in fields]
    casts = ", ".join(f"%s::{field.db_type(connection)}" for field in columns)
    names = ", ".join(connection.ops.quote_name(field.column) for field in columns)
    sets = ", ".join(
        f"{name} = v.{name}" for name in (connection.ops.quote_name(f.column) for f in columns)
    )
    rows = ", ".join([f"(%s, {casts})"] * len(jobs))
    params: list[Any] = [[job.id for job in jobs]]
    for job in jobs:
        params.append(job.id)
        params += [
            field.get_db_prep_value(getattr(job, field.attname), connection) for field in columns
        ]
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH was AS (SELECT COALESCE(sum(octet_length(b.*::text)), 0) AS n"
            f" FROM {table} b WHERE b.id = ANY(%s)),"
            f" later AS (UPDATE {table} AS j SET {sets} FROM (VALUES {rows}) AS v(id, {names})"
            " WHERE j.id = v.id RETURNING octet_length(j.*::text) AS n)"
            " SELECT (SELECT COALESCE(sum(n), 0) FROM later) - (SELECT n FROM was)",
            params,
        )
        return int(cursor.fetchone()[0])


def _scheduler_killed() -> bool:
    return JobsWorkerState.objects.filter(key=KILL_SWITCH_KEY, value="on").exists()
