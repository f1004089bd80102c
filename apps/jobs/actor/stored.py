"""What a user's jobs and run records weigh against ``storage_bytes``, charged in the call.

Design note. Every write to a user's job rows and run records happens inside one of their
actor calls (JobManager, RunLog), so the bytes are charged to the UserMeter in that same
transaction (``reserve_storage_bytes_in_call``): they commit or roll back with the rows. The
weight is the one reconciliation measures — a row's text form, ``octet_length(row::text)`` —
taken by the database on the rows as written (an UPDATE's ``RETURNING`` beside a read of the
same rows from the statement's snapshot), so the meter and the nightly measurement agree to
the byte instead of drifting by an estimate's error.

* A job definition written by its owner (create, an update of ``DEFINITION`` fields) is
  refused past the limit with the coded ``limit_reached`` (429): the call rolls back, nothing
  is stored. Other updates (pause, resume, preserve, expiry) are charged with ``force``: a
  person over the limit must still be able to stop a job. A delete gives its bytes back.
* A package's declared jobs (``package-job:…``) are synced by its publish after the
  publish committed, its source already checked against the limit: they are charged with
  ``force``, so a publish is never left with half its jobs.
* The scheduler's own fields on a job row (claim token, lease, last run, next run) change
  size as it works; that change is charged with ``force``: a claim or a report must not fail
  on the meter, and the change is a few bytes, bounded per job.
* Run records are ``runs`` and ``run_logs`` rows, and the invocation ledger's rows (they
  keep a mutating call's response for replay). A finished run over the limit keeps a
  minimal record (``records.minimal``) and an invocation its status without its response
  (``RESPONSE_DROPPED``), charged with ``force``; pruning gives bytes back. The per-job and
  per-package counters beside them (observability, workflow projections, milestones) are
  bounded bookkeeping and are not payload.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from apps.entitlements.services import LimitReached, reserve_storage_bytes_in_call
from apps.jobs.actor.models import PackageInvocationLedger
from kody.actors import CallContext

# Reconciliation's measure of the run records in a user's schema (registered in ``ready()``).
RUN_RECORDS_SQL = (
    "SELECT (SELECT COALESCE(sum(octet_length(r.*::text)), 0) FROM runs r)"
    " + (SELECT COALESCE(sum(octet_length(l.*::text)), 0) FROM run_logs l)"
    " + (SELECT COALESCE(sum(octet_length(i.*::text)), 0) FROM package_invocation_ledger i)"
)
# What an invocation's stored response becomes when keeping it would pass the limit.
RESPONSE_DROPPED = {"dropped": "storage_limit_exceeded"}

_JOB_ROWS = (
    "SELECT COALESCE(sum(octet_length(j.*::text)), 0)::bigint FROM jobs j"
    " WHERE j.user_id = %s AND j.id = ANY(%s)"
)


# The fields that make up what a job does: an update that writes one of them is the owner
# adding content, refused past the limit.
DEFINITION = frozenset({"name", "params_json", "schedule_json", "timezone"})


def package_owned(job_id: str) -> bool:
    return job_id.startswith("package-job:")


def job_rows(user_id: str, ids: Iterable[str]) -> int:
    """What these job rows of the user weigh now, as reconciliation measures them."""
    wanted = list(ids)
    if not wanted:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_JOB_ROWS, [user_id, wanted])
        return int(cursor.fetchone()[0])


def charge(context: CallContext, n: int, *, force: bool = False) -> None:
    """Charge ``n`` bytes (negative: give back) in this call; past the limit raises
    ``LimitReached`` unless ``force``."""
    if n:
        reserve_storage_bytes_in_call(context, n, force=force)


class JobRowsWeighed:
    """Weigh job rows around a write and charge the difference: ``with JobRowsWeighed(...)``
    before an UPDATE or DELETE whose rows are named up front."""

    def __init__(self, context: CallContext, ids: Iterable[str], *, force: bool = False) -> None:
        self.context, self.ids, self.force = context, list(ids), force
        self.before = 0

    def __enter__(self) -> JobRowsWeighed:
        self.before = job_rows(str(self.context.user_id), self.ids)
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None:
            after = job_rows(str(self.context.user_id), self.ids)
            charge(self.context, after - self.before, force=self.force)


def expire_jobs(user_id: str, now: object) -> int:
    """Disable the user's enabled jobs whose ``expires_at`` has passed; answers the rows'
    growth (one statement, as the plain UPDATE it replaces)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH was AS (SELECT b.id, octet_length(b.*::text) AS n FROM jobs b"
            "  WHERE b.user_id = %(uid)s AND b.enabled AND b.expires_at <= %(now)s),"
            " later AS (UPDATE jobs j SET enabled = false, updated_at = %(now)s FROM was"
            "  WHERE j.id = was.id RETURNING octet_length(j.*::text) AS n)"
            " SELECT (SELECT COALESCE(sum(n), 0) FROM later)"
            " - (SELECT COALESCE(sum(n), 0) FROM was)",
            {"uid": user_id, "now": now},
        )
        return int(cursor.fetchone()[0])


def ledger_row(invocation_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(sum(octet_length(i.*::text)), 0) FROM package_invocation_ledger i"
            " WHERE i.id = %s",
            [invocation_id],
        )
        return int(cursor.fetchone()[0])


def finish_invocation(
    context: CallContext, invocation_id: str, status: str, response: object, now: object
) -> bool:
    """Store a pending invocation's outcome once, its growth charged; past the limit the
    outcome is kept without its response (the exactly-once guard must still close)."""
    field = PackageInvocationLedger._meta.get_field("response_json")
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH was AS (SELECT octet_length(b.*::text) AS n FROM package_invocation_ledger b"
            "  WHERE b.id = %(id)s AND b.status = 'pending'),"
            " later AS (UPDATE package_invocation_ledger i SET status = %(status)s,"
            "  response_json = %(response)s, updated_at = %(now)s"
            "  WHERE i.id = %(id)s AND i.status = 'pending' RETURNING octet_length(i.*::text) AS n)"
            " SELECT (SELECT n FROM was), (SELECT n FROM later)",
            {
                "id": invocation_id,
                "status": status,
                "response": field.get_db_prep_save(response, connection),
                "now": now,
            },
        )
        was, later = cursor.fetchone()
    if later is None:
        return False
    try:
        charge(context, int(later) - int(was))
    except LimitReached:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE package_invocation_ledger i SET response_json = %s WHERE i.id = %s"
                " RETURNING octet_length(i.*::text)",
                [field.get_db_prep_save(RESPONSE_DROPPED, connection), invocation_id],
            )
            kept = int(cursor.fetchone()[0])
        charge(context, kept - int(was), force=True)
    return True
