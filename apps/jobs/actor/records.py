"""Writing and reading run records inside a user's actor transaction.

RunLog owns these tables, but JobManager runs in the same schema under the same owner-row
lock, so it writes a job's run record and the job's new schedule in ONE transaction (the
original needed two Durable Objects and could lose either half). Only actor methods call this.

Self-pruning: every ``PRUNE_EVERY`` finishes (a run, a workflow or an invocation reaching a
terminal state), runs older than ``RUN_RETENTION`` or beyond the newest ``MAX_RUNS`` are
deleted with their log lines; ledger rows and terminal workflow projections older than 90 days
go in the same pass. Job observability, package run successes and activation milestones are
one row per job, package or milestone and are never pruned (seed 000).

A successful run of a package counts toward that package's ``package_run_successes`` and
reaches the user's activation milestones: ``package_run_succeeded`` at the first successful
package run of any kind, ``package_activated`` at the first one that ran without the user
pressing a button (``AUTONOMOUS_SURFACES``: a job, workflow, webhook, subscription or service
ran it). A milestone keeps the time and package it was first reached with. No surface records
a run with a ``package_id`` yet — packages do not run here, and a job's run (a capability
call) is not a package run — so in production these two tables stay empty until the package
runtime records its runs through ``record_run``; the milestones are the seed's two package
milestones, not job ones.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.db import connection, models
from django.db.models import NOT_PROVIDED, Q
from django.utils import timezone

from apps.entitlements.services import LimitReached
from apps.jobs.actor import models as m
from apps.jobs.actor import stored
from kody.actors import CallContext
from kody.fields import new_id

MAX_LOG_LINES = 200
MAX_RUNS = 2000
RUN_RETENTION = timedelta(days=30)
LEDGER_RETENTION = timedelta(days=90)
WORKFLOW_RETENTION = timedelta(days=90)
PRUNE_EVERY = 32
MAX_MESSAGE = 4000
# What a run over the storage limit keeps of its error message (``minimal``).
MINIMAL_MESSAGE = 200
TERMINAL_WORKFLOW = ("success", "error", "cancelled")
AUTONOMOUS_SURFACES = ("job", "workflow", "webhook", "subscription", "service")

RUN_FIELDS = (
    "surface",
    "status",
    "name",
    "package_id",
    "package_kody_id",
    "source_id",
    "published_commit",
    "storage_id",
    "job_id",
    "workflow_id",
    "invocation_id",
    "session_id",
    "idempotency_key",
    "parent_run_id",
    "error_name",
    "error_message",
    "metadata_json",
)


class RunJson(TypedDict, total=False):
    id: str
    surface: str
    status: str
    name: str
    jobId: str | None
    packageId: str | None
    storageId: str | None
    parentRunId: str | None
    idempotencyKey: str | None
    startedAt: str
    finishedAt: str | None
    durationMs: int | None
    errorName: str | None
    errorMessage: str | None
    errorTriage: str | None
    triageNote: str | None
    metadata: Any


def record_run(
    context: CallContext, run: dict[str, Any], lines: list[dict[str, Any]] | None = None
) -> str:
    """Insert one finished (or running) run and its first 200 log lines; returns its id."""
    return record_runs(context, [(run, lines)])[0]


def record_runs(
    context: CallContext,
    items: list[tuple[dict[str, Any], list[dict[str, Any]] | None]],
    forced: int = 0,
) -> list[str]:
    """``record_run`` for several runs in one go (a batch of job reports): ONE statement
    inserts the runs and their log lines, upserts each job's observability row, counts the
    finishes (data-modifying CTEs on separate tables) and answers the bytes the rows hold, so
    a run costs one round trip and no ORM insert compiler (issue 9: the mixed workload's
    RunLog.record was three round trips and most of a shard worker's Python). Each value is
    converted as the ORM converts it on save (``Field.get_db_prep_save``); a column with a
    database default is left to it.

    The rows' bytes are charged to the storage meter in this call (with ``forced``: bytes
    the caller wrote that must be charged whatever the limit). Past the limit the runs are
    kept as ``minimal`` records instead — a finished run is never lost, its output is."""
    rows: list[m.Run] = []
    log_lines: list[m.RunLogLine] = []
    for run, lines in items:
        started = _at(run["started_at"])
        finished = _at(run.get("finished_at"))
        row = m.Run(
            id=run.get("id") or new_id(),
            started_at=started,
            finished_at=finished,
            duration_ms=_duration(started, finished),
            **{field: _clip(field, run.get(field)) for field in RUN_FIELDS if field in run},
        )
        if not row.name:
            row.name = row.surface
        lines = list(lines or [])
        if len(lines) > MAX_LOG_LINES:
            dropped = len(lines) - MAX_LOG_LINES
            row.metadata_json = {**(row.metadata_json or {}), "droppedLogLines": dropped}
        rows.append(row)
        log_lines += (
            m.RunLogLine(
                run_id=row.id,
                sequence=index,
                level=str(line.get("level", "info"))[:16],
                message=str(line.get("message", ""))[:MAX_MESSAGE],
                fields_json=line.get("fields"),
            )
            for index, line in enumerate(lines[:MAX_LOG_LINES])
        )
    if not rows:
        stored.charge(context, forced, force=True)
        return []
    writes = [_insert(m.Run, rows, weigh=True)]
    weighed = "(SELECT COALESCE(sum(n), 0) FROM w0)"
    if log_lines:
        writes.append(_insert(m.RunLogLine, log_lines, weigh=True))
        weighed += " + (SELECT COALESCE(sum(n), 0) FROM w1)"
    observed = _observe_jobs(
        [r for r in rows if r.job_id and r.surface == "job" and r.status != "running"]
    )
    if observed is not None:
        writes.append(observed)
    finished_runs = sum(row.status != "running" for row in rows)
    finishes = "0"
    if finished_runs:
        writes.append((_COUNT_FINISH, [finished_runs]))
        finishes = f"(SELECT value FROM w{len(writes) - 1})"
    ctes = ", ".join(f"w{index} AS ({sql})" for index, (sql, _) in enumerate(writes))
    params = [param for _, each in writes for param in each]
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {ctes} SELECT {weighed}, {finishes}", params)
        added, finished = cursor.fetchone()
    try:
        stored.charge(context, int(added) + forced)
    except LimitReached:
        _keep_minimal(context, rows, forced)
    for row in rows:
        if row.package_id and row.status == "success":
            _observe_package(row)
    if finished_runs and finished >= PRUNE_EVERY:
        prune(context)
    return [row.id for row in rows]


def minimal(row: m.Run, lines: int) -> m.Run:
    """What a run keeps when its full record would pass the storage limit: who and what ran,
    when, and how it ended (an error's name and the first words of its message), marked
    ``storage_limit_exceeded``; its log lines and other metadata are dropped. A user keeps
    a trace of every run and why its output is missing; the job keeps its schedule."""
    kept = {k: v for k, v in _meta(row).items() if k in _MINIMAL_METADATA}
    row.metadata_json = {**kept, "outputDropped": "storage_limit_exceeded"}
    if lines:
        row.metadata_json["droppedLogLines"] = lines
    if row.error_message:
        row.error_message = row.error_message[:MINIMAL_MESSAGE]
    return row


def _meta(row: m.Run) -> dict[str, Any]:
    return row.metadata_json if isinstance(row.metadata_json, dict) else {}


# Small keys a job run's record answers questions with (which occurrence, why skipped).
_MINIMAL_METADATA = ("scheduledFor", "stale", "skipped")


def _keep_minimal(context: CallContext, rows: list[m.Run], forced: int) -> None:
    """Replace the runs just written (refused by the meter) with their minimal records and
    charge those whatever the limit: dropping the run too would lose it without a trace."""
    ids = [row.id for row in rows]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT run_id, count(*) FROM run_logs WHERE run_id = ANY(%s) GROUP BY run_id", [ids]
        )
        counted = dict(cursor.fetchall())
        cursor.execute("DELETE FROM run_logs WHERE run_id = ANY(%s)", [ids])
        cursor.execute("DELETE FROM runs WHERE id = ANY(%s)", [ids])
        small = [
            minimal(row, counted.get(row.id, 0) + int(_meta(row).get("droppedLogLines") or 0))
            for row in rows
        ]
        sql, params = _insert(m.Run, small, weigh=True)
        cursor.execute(f"WITH w AS ({sql}) SELECT COALESCE(sum(n), 0) FROM w", params)
        kept = int(cursor.fetchone()[0])
    stored.charge(context, kept + forced, force=True)


def _columns(model: type[models.Model]) -> list[Any]:
    """The fields an insert writes: every column but those the database fills itself."""
    return [f for f in model._meta.concrete_fields if f.db_default is NOT_PROVIDED]


def _insert(
    model: type[models.Model], objects: list[Any], *, weigh: bool = False
) -> tuple[str, list[Any]]:
    """One multi-row INSERT of ``objects``, its values converted as the ORM saves them;
    ``weigh``: it returns each row's ``octet_length(row::text)`` as ``n``."""
    fields = _columns(model)
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [
        f.get_db_prep_save(getattr(each, f.attname), connection) for each in objects for f in fields
    ]
    returning = " RETURNING octet_length(t.*::text) AS n" if weigh else ""
    return (
        f"INSERT INTO {model._meta.db_table} AS t ({names})"
        f" VALUES {', '.join([row] * len(objects))}{returning}",
        params,
    )


# The finish count's upsert: ``count_finish`` runs it alone, ``record_runs`` with its CTEs.
_COUNT_FINISH = (
    "INSERT INTO run_log_meta (key, value) VALUES ('finishes_since_retention', %s)"
    " ON CONFLICT (key) DO UPDATE SET value = run_log_meta.value + EXCLUDED.value"
    " RETURNING value"
)


def _at(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _duration(started: datetime | None, finished: datetime | None) -> int | None:
    if started is None or finished is None:
        return None
    return max(0, int((finished - started).total_seconds() * 1000))


def _clip(field: str, value: Any) -> Any:
    if isinstance(value, str) and field == "error_message":
        return value[:MAX_MESSAGE]
    return value


def _observe_jobs(runs: list[m.Run]) -> tuple[str, list[Any]] | None:
    """Each job's observability row: its last run, and its counts, in one upsert (a part of
    ``record_runs``' statement; None when no job run finished)."""
    by_job: dict[str, list[Any]] = {}
    for run in runs:  # in report order: a job's last run here is its latest
        ok = run.status == "success"
        seen = by_job.get(str(run.job_id))
        runs_before, ok_before, errors_before = seen[5:8] if seen else (0, 0, 0)
        by_job[str(run.job_id)] = [
            run.job_id,
            run.started_at,
            run.status,
            None if ok else run.error_message,
            run.duration_ms,
            runs_before + 1,
            ok_before + int(ok),
            errors_before + int(not ok),
        ]
    if not by_job:
        return None
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(by_job))
    return (
        "INSERT INTO job_run_observability (job_id, last_run_at, last_run_status,"
        " last_run_error, last_duration_ms, run_count, success_count, error_count)"
        f" VALUES {values} ON CONFLICT (job_id) DO UPDATE SET"
        " last_run_at = EXCLUDED.last_run_at, last_run_status = EXCLUDED.last_run_status,"
        " last_run_error = EXCLUDED.last_run_error,"
        " last_duration_ms = EXCLUDED.last_duration_ms,"
        " run_count = job_run_observability.run_count + EXCLUDED.run_count,"
        " success_count = job_run_observability.success_count + EXCLUDED.success_count,"
        " error_count = job_run_observability.error_count + EXCLUDED.error_count",
        [value for row in by_job.values() for value in row],
    )


def _observe_package(run: m.Run) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO package_run_successes (package_id, success_count) VALUES (%s, 1)"
            " ON CONFLICT (package_id) DO UPDATE"
            " SET success_count = package_run_successes.success_count + 1",
            [run.package_id],
        )
        reached = ["package_run_succeeded"]
        if run.surface in AUTONOMOUS_SURFACES:
            reached.append("package_activated")
        for milestone in reached:
            cursor.execute(
                "INSERT INTO activation_milestones (milestone, reached_at, package_id)"
                " VALUES (%s, %s, %s) ON CONFLICT (milestone) DO NOTHING",
                [milestone, run.finished_at or run.started_at, run.package_id],
            )


def count_finish(context: CallContext, n: int = 1) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_COUNT_FINISH, [n])
        finishes = cursor.fetchone()[0]
    if finishes >= PRUNE_EVERY:
        prune(context)


def prune(context: CallContext, now: datetime | None = None) -> dict[str, int]:
    """Apply the run, ledger and workflow windows; resets the finish counter. A ledger row is
    kept 90 days whatever its status: one still pending that long was abandoned. The bytes of
    the runs, log lines and ledger rows it deletes go back to the storage meter in the same
    call."""
    now = now or timezone.now()
    deleted = {"runs": 0, "ledger": 0, "workflows": 0}
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH gone AS ("
            "  DELETE FROM runs r WHERE started_at < %s OR id IN ("
            "    SELECT id FROM runs ORDER BY started_at DESC, id DESC OFFSET %s)"
            "  RETURNING id, octet_length(r.*::text) AS n"
            "), lines AS (DELETE FROM run_logs l WHERE run_id IN (SELECT id FROM gone)"
            "  RETURNING octet_length(l.*::text) AS n)"
            " SELECT count(*), COALESCE(sum(n), 0)"
            "   + (SELECT COALESCE(sum(n), 0) FROM lines) FROM gone",
            [now - RUN_RETENTION, MAX_RUNS],
        )
        deleted["runs"], freed = cursor.fetchone()
        cursor.execute("UPDATE run_log_meta SET value = 0 WHERE key = 'finishes_since_retention'")
        cursor.execute(
            "WITH gone AS (DELETE FROM package_invocation_ledger i WHERE created_at < %s"
            "  RETURNING octet_length(i.*::text) AS n)"
            " SELECT count(*), COALESCE(sum(n), 0) FROM gone",
            [now - LEDGER_RETENTION],
        )
        deleted["ledger"], ledger_freed = cursor.fetchone()
    stored.charge(context, -int(freed) - int(ledger_freed))
    deleted["workflows"] = m.WorkflowProjection.objects.filter(
        status__in=TERMINAL_WORKFLOW, completed_at__lt=now - WORKFLOW_RETENTION
    ).delete()[0]
    return deleted


def triage(
    context: CallContext, run_id: str, triage: str | None, note: str | None, by: str
) -> bool:
    """Set a run's triage; the note is the owner's text, so the run's growth is charged and
    refused past the limit (the call rolls back, the triage is not stored)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH was AS (SELECT octet_length(b.*::text) AS n FROM runs b WHERE b.id = %s),"
            " later AS (UPDATE runs r SET error_triage = %s, triage_note = %s,"
            "  triaged_at = %s, triaged_by = %s WHERE r.id = %s"
            "  RETURNING octet_length(r.*::text) AS n)"
            " SELECT (SELECT n FROM later) - (SELECT n FROM was), (SELECT count(*) FROM later)",
            [run_id, triage, note, timezone.now(), by, run_id],
        )
        grown, changed = cursor.fetchone()
    stored.charge(context, int(grown or 0))
    return bool(changed)


def as_json(run: m.Run) -> RunJson:
    return {
        "id": run.id,
        "surface": run.surface,
        "status": run.status,
        "name": run.name,
        "jobId": run.job_id,
        "packageId": run.package_id,
        "storageId": run.storage_id,
        "parentRunId": run.parent_run_id,
        "idempotencyKey": run.idempotency_key,
        "startedAt": run.started_at.isoformat(),
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationMs": run.duration_ms,
        "errorName": run.error_name,
        "errorMessage": run.error_message,
        "errorTriage": run.error_triage,
        "triageNote": run.triage_note,
        "metadata": run.metadata_json,
    }


def encode_cursor(run: m.Run) -> str:
    raw = json.dumps([run.started_at.isoformat(), run.id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        started, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(started), str(run_id)
    except (ValueError, TypeError) as exc:
        raise ValueError("bad cursor") from exc


def page(filters: dict[str, Any], cursor: str | None, limit: int) -> dict[str, Any]:
    """Newest first, keyset-paged by (started_at, id)."""
    rows = m.Run.objects.filter(**filters)
    if cursor:
        started, run_id = decode_cursor(cursor)
        rows = rows.filter(Q(started_at__lt=started) | Q(started_at=started, id__lt=run_id))
    found = list(rows.order_by("-started_at", "-id")[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    return {
        "runs": [as_json(run) for run in found],
        "nextCursor": encode_cursor(found[-1]) if more else None,
    }
