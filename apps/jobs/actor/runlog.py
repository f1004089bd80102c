"""RunLog: a user's execution history (SCHEMA.md §2.3).

Runs with their log lines, the package-invocation ledger, workflow projections (the
``concurrent_workflows`` count), job-run observability, package run successes and activation
milestones. It prunes itself every 32 finishes (``records.prune``).

Writers in use: runs and log lines (every job run and each capability call it makes, through
the JobManager), job-run observability (the same), the invocation ledger (job runs whose target
mutates, ``apps.jobs.services.runner``). Not yet reached by any product event: workflow
projections (no workflow runtime) and package run successes / activation milestones (no
package runs); see ``apps.jobs.services.runs`` and ``records``.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count
from django.utils import timezone

from apps.jobs.actor import models as m
from apps.jobs.actor import records, stored
from kody.actors import Actor, deletion_safe, reads
from kody.fields import new_id

RUN_LOG_VERSION = 10  # the original's RunLog schema version these tables implement
ACTIVE_WORKFLOW = ("queued", "running")
WORKFLOW_NEXT = {
    "queued": ("running", "success", "error", "cancelled"),
    "running": ("success", "error", "cancelled"),
}
LEDGER_STATUSES = ("pending", "success", "error")
TRIAGE = ("none", "investigating", "expected", "fixed", "ignored")
EXPORT_PHASES = ("runs", "ledger", "workflows", "jobs", "packages", "milestones")


# ``concurrent_workflows`` as one statement over RunLog's own table: what
# ``RunLog.concurrent_workflows`` runs, and what the meter's snapshot reads in the same
# transaction (``counters.register_counter(..., schema_count=...)``).
CONCURRENT_WORKFLOWS_SQL = (
    f"SELECT COUNT(*) FROM {m.WorkflowProjection._meta.db_table}"
    f" WHERE status IN ({', '.join(repr(s) for s in ACTIVE_WORKFLOW)})"
)


class RunNotFound(LookupError):
    pass


class RunLog(Actor):
    name = "jobs.RunLog"
    tables = m.RUN_TABLES

    def record(self, run: dict[str, Any], lines: list[dict[str, Any]] | None = None) -> str:
        return records.record_run(self.context, run, lines)

    @reads
    def get_run(self, run_id: str) -> dict[str, Any] | None:
        run = m.Run.objects.filter(id=run_id).first()
        if run is None:
            return None
        lines = m.RunLogLine.objects.filter(run_id=run_id).order_by("sequence")
        return {
            **records.as_json(run),
            "logs": [
                {
                    "sequence": x.sequence,
                    "level": x.level,
                    "message": x.message,
                    "fields": x.fields_json,
                }
                for x in lines
            ],
        }

    @reads
    def list_runs(
        self, filters: dict[str, str], cursor: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        allowed = {k: v for k, v in filters.items() if k in ("surface", "status", "job_id", "name")}
        return records.page(allowed, cursor, limit)

    @reads
    def summary(self) -> dict[str, Any]:
        since = timezone.now() - records.RUN_RETENTION
        counts = (
            m.Run.objects.filter(started_at__gte=since)
            .values("surface", "status")
            .annotate(n=Count("id"))
        )
        by: dict[str, dict[str, int]] = {}
        for row in counts:
            by.setdefault(row["surface"], {})[row["status"]] = row["n"]
        return {
            "windowDays": records.RUN_RETENTION.days,
            "bySurface": by,
            "total": sum(sum(v.values()) for v in by.values()),
            "concurrentWorkflows": self.concurrent_workflows(),
        }

    def triage(self, run_id: str, triage: str | None, note: str | None, by: str) -> bool:
        return records.triage(self.context, run_id, triage, note, by)

    @reads
    def concurrent_workflows(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute(CONCURRENT_WORKFLOWS_SQL)
            return int(cursor.fetchone()[0])

    @reads
    def workflows(self, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        rows = m.WorkflowProjection.objects.all()
        if status:
            rows = rows.filter(status=status)
        return [_workflow_json(w) for w in rows.order_by("-run_at", "-id")[:limit]]

    def cancel_workflow(self, workflow_id: str) -> dict[str, Any] | None:
        return self.move_workflow(workflow_id, "cancelled")

    def start_workflow(self, workflow: dict[str, Any], limit: int) -> dict[str, Any]:
        """Project a queued workflow unless ``limit`` are active already (counted here, by the
        single writer, so two starts cannot both take the last slot). A start repeating an
        ``idempotency_key`` gets the first one's projection back."""
        key = workflow.get("idempotency_key")
        if key:
            found = m.WorkflowProjection.objects.filter(idempotency_key=key).first()
            if found is not None:
                return {"started": False, "workflow": _workflow_json(found)}
        active = self.concurrent_workflows()
        if active >= limit:
            return {"started": False, "workflow": None, "active": active}
        row = m.WorkflowProjection(
            id=new_id(),
            status="queued",
            run_at=datetime.fromisoformat(workflow.get("run_at") or timezone.now().isoformat()),
            **{k: workflow.get(k) for k in WORKFLOW_FIELDS},
        )
        row.save(force_insert=True)
        return {"started": True, "workflow": _workflow_json(row)}

    def move_workflow(
        self, workflow_id: str, status: str, error: str | None = None
    ) -> dict[str, Any] | None:
        """queued -> running -> success | error | cancelled; a terminal projection stays as it
        is (a late report of a cancelled workflow changes nothing)."""
        row = m.WorkflowProjection.objects.filter(id=workflow_id).first()
        if row is None:
            return None
        if status in WORKFLOW_NEXT.get(row.status, ()):
            row.status = status
            row.last_error = error[: records.MAX_MESSAGE] if error else row.last_error
            if status in records.TERMINAL_WORKFLOW:
                row.completed_at = timezone.now()
                records.count_finish(self.context)
            row.save(update_fields=["status", "last_error", "completed_at"])
        return _workflow_json(row)

    # --- the package-invocation ledger (keyed replay, 90 days) ---------------------------

    def begin_invocation(
        self, key: dict[str, str], request_hash: str, labels: dict[str, Any]
    ) -> dict[str, Any]:
        """Claim a keyed invocation. ``new``: run it, then ``finish_invocation``; ``replay``:
        answer with the stored response; ``in_progress``: the first is still running;
        ``mismatch``: the key was used with a different request."""
        row = m.PackageInvocationLedger.objects.filter(**_ledger_key(key)).first()
        if row is None:
            row = m.PackageInvocationLedger(
                id=new_id(),
                request_hash=request_hash,
                status="pending",
                # The app clock, as the prune that reads it uses (not the database's Now()).
                created_at=timezone.now(),
                updated_at=timezone.now(),
                **_ledger_key(key),
                **{k: labels.get(k) for k in ("package_kody_id", "source", "topic")},
            )
            row.save(force_insert=True)
            # A small row the exactly-once guard needs: charged whatever the limit.
            stored.charge(self.context, stored.ledger_row(row.id), force=True)
            return {"outcome": "new", "id": row.id}
        if row.request_hash != request_hash:
            return {"outcome": "mismatch", "id": row.id}
        if row.status == "pending":
            return {"outcome": "in_progress", "id": row.id}
        return {
            "outcome": "replay",
            "id": row.id,
            "status": row.status,
            "response": row.response_json,
        }

    def finish_invocation(self, invocation_id: str, status: str, response: Any) -> bool:
        """Store a pending invocation's outcome once; a second report changes nothing."""
        if status not in LEDGER_STATUSES[1:]:
            raise ValueError("an invocation finishes as success or error")
        done = stored.finish_invocation(
            self.context, invocation_id, status, response, timezone.now()
        )
        if done:
            records.count_finish(self.context)
        return done

    @reads
    def activation(self) -> dict[str, Any]:
        """Milestones and per-package success counts: content-free, for insights and export."""
        return {
            "milestones": {
                r.milestone: {"reachedAt": r.reached_at.isoformat(), "packageId": r.package_id}
                for r in m.ActivationMilestone.objects.all()
            },
            "packageRunSuccesses": dict(
                m.PackageRunSuccess.objects.values_list("package_id", "success_count")
            ),
        }

    @reads
    def job_observability(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        rows = m.JobRunObservability.objects.filter(job_id__in=job_ids)
        return {
            r.job_id: {
                "lastRunError": r.last_run_error,
                "lastDurationMs": r.last_duration_ms,
                "runCount": r.run_count,
                "successCount": r.success_count,
                "errorCount": r.error_count,
            }
            for r in rows
        }

    def prune(self) -> dict[str, int]:
        return records.prune(self.context)

    @deletion_safe
    def export_runs(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """One cursor pages runs (with their lines) first, then each dedicated table."""
        phase, after = _decode(cursor)
        model, key = _PHASE_MODELS[phase]
        rows = model.objects.order_by(key)
        if after is not None:
            rows = rows.filter(**{f"{key}__gt": after})
        found = list(rows[: limit + 1])
        page = found[:limit]
        items = [_export_row(phase, row) for row in page]
        if len(found) > limit:
            next_cursor = _encode(phase, getattr(page[-1], key))
        else:
            index = EXPORT_PHASES.index(phase)
            next_cursor = (
                _encode(EXPORT_PHASES[index + 1], None) if index + 1 < len(EXPORT_PHASES) else None
            )
        return {"phase": phase, "items": items, "next_cursor": next_cursor}

    @deletion_safe
    def purge(self) -> dict[str, Any]:
        deleted = {}
        for model in (
            m.RunLogLine,
            m.Run,
            m.PackageInvocationLedger,
            m.WorkflowProjection,
            m.JobRunObservability,
            m.PackageRunSuccess,
            m.ActivationMilestone,
            m.RunLogMeta,
        ):
            deleted[model._meta.db_table] = model.objects.all().delete()[0]
        return {"deleted": deleted}


WORKFLOW_FIELDS = (
    "binding_name",
    "source_type",
    "package_id",
    "kody_id",
    "source_id",
    "workflow_name",
    "export_name",
    "idempotency_key",
    "plan_date",
)
LEDGER_KEY = ("token_id", "package_id", "export_name", "idempotency_key")


def _ledger_key(key: dict[str, str]) -> dict[str, str]:
    return {k: key[k] for k in LEDGER_KEY}


_PHASE_MODELS: dict[str, tuple[Any, str]] = {
    "runs": (m.Run, "id"),
    "ledger": (m.PackageInvocationLedger, "id"),
    "workflows": (m.WorkflowProjection, "id"),
    "jobs": (m.JobRunObservability, "job_id"),
    "packages": (m.PackageRunSuccess, "package_id"),
    "milestones": (m.ActivationMilestone, "milestone"),
}


def _encode(phase: str, after: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps([phase, after]).encode()).decode()


def _decode(cursor: str | None) -> tuple[str, Any]:
    if not cursor:
        return "runs", None
    phase, after = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    if phase not in _PHASE_MODELS:
        raise ValueError("bad cursor")
    return phase, after


def _export_row(phase: str, row: Any) -> dict[str, Any]:
    from django.forms.models import model_to_dict

    data = {
        f.name: (v.isoformat() if hasattr(v, "isoformat") else v)
        for f in row._meta.concrete_fields
        for v in [getattr(row, f.attname)]
    }
    if phase == "runs":
        data["logs"] = [
            model_to_dict(line, fields=["sequence", "level", "message", "fields_json"])
            for line in m.RunLogLine.objects.filter(run_id=row.id).order_by("sequence")
        ]
    return data


def _workflow_json(w: m.WorkflowProjection) -> dict[str, Any]:
    return {
        "id": w.id,
        "workflowName": w.workflow_name,
        "packageId": w.package_id,
        "status": w.status,
        "runAt": w.run_at.isoformat(),
        "completedAt": w.completed_at.isoformat() if w.completed_at else None,
        "lastError": w.last_error,
    }
