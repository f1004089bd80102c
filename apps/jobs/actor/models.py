"""Per-user tables of jobs: RunLog (SCHEMA.md §2.3) and StorageRunner buckets (§2.6).

No user_id anywhere: the schema is the user. JobManager (§2.5) has no tables of its own; its
only state is its alarm, armed from the public ``jobs.next_run_at``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from kody.userschema import ActorModel

JOBS_ACTORS = 4  # the per-user schema version that introduced these tables

RUN_SURFACES = (
    "execute",
    "export",
    "subscription",
    "app_fetch",
    "app_realtime",
    "service",
    "job",
    "workflow",
    "retriever",
    "webhook",
)
RUN_STATUSES = ("running", "success", "error")


class RunLogMeta(ActorModel):
    """schema_version, run_count, finishes_since_retention."""

    key = models.CharField(max_length=64, primary_key=True, db_collation="C")
    value = models.BigIntegerField()

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "run_log_meta"


class Run(ActorModel):
    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    surface = models.CharField(max_length=16)
    status = models.CharField(max_length=16)
    name = models.CharField(max_length=255)
    package_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    package_kody_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    source_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    published_commit = models.CharField(max_length=64, null=True)  # noqa: DJ001
    storage_id = models.CharField(max_length=512, null=True)  # noqa: DJ001
    job_id = models.CharField(max_length=512, null=True)  # noqa: DJ001
    workflow_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    invocation_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    session_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    idempotency_key = models.CharField(max_length=512, null=True)  # noqa: DJ001
    parent_run_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)
    duration_ms = models.BigIntegerField(null=True)
    error_name = models.CharField(max_length=255, null=True)  # noqa: DJ001
    error_message = models.TextField(null=True)  # noqa: DJ001
    metadata_json = models.JSONField(null=True)
    error_triage = models.CharField(max_length=32, null=True)  # noqa: DJ001
    triage_note = models.TextField(null=True)  # noqa: DJ001
    triaged_at = models.DateTimeField(null=True)
    triaged_by = models.CharField(max_length=255, null=True)  # noqa: DJ001

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "runs"
        indexes = [
            # Keyset pages: newest first, by (started_at, id), optionally within one filter.
            models.Index(fields=["-started_at", "-id"], name="runs_started_ix"),
            models.Index(fields=["surface", "-started_at", "-id"], name="runs_surface_ix"),
            models.Index(fields=["status", "-started_at", "-id"], name="runs_status_ix"),
            models.Index(fields=["job_id", "-started_at", "-id"], name="runs_job_ix"),
            models.Index(fields=["name", "-started_at", "-id"], name="runs_name_ix"),
            models.Index(
                fields=["idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="runs_idempotency_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(surface__in=RUN_SURFACES), name="runs_surface_ok"),
            models.CheckConstraint(condition=Q(status__in=RUN_STATUSES), name="runs_status_ok"),
        ]


class RunLogLine(ActorModel):
    """At most 200 lines per run (the rest are dropped and counted in the run's metadata)."""

    pk = models.CompositePrimaryKey("run_id", "sequence")
    run_id = models.CharField(max_length=64, db_collation="C")
    sequence = models.IntegerField()
    level = models.CharField(max_length=16)
    message = models.TextField()
    fields_json = models.JSONField(null=True)
    logged_at = models.DateTimeField(db_default=Now())

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "run_logs"


class PackageInvocationLedger(ActorModel):
    """Keyed package-invocation replay (kept 90 days)."""

    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    token_id = models.CharField(max_length=64)
    package_id = models.CharField(max_length=255)
    package_kody_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    export_name = models.CharField(max_length=255)
    idempotency_key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=128)
    source = models.CharField(max_length=255, null=True)  # noqa: DJ001
    topic = models.CharField(max_length=255, null=True)  # noqa: DJ001
    status = models.CharField(max_length=16)
    response_json = models.JSONField(null=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "package_invocation_ledger"
        indexes = [models.Index(fields=["created_at"], name="invocation_ledger_created_ix")]
        constraints = [
            models.UniqueConstraint(
                fields=["token_id", "package_id", "export_name", "idempotency_key"],
                name="invocation_ledger_key_uq",
            )
        ]


class WorkflowProjection(ActorModel):
    """The source of truth for concurrent_workflows; terminal rows pruned after 90 days."""

    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    binding_name = models.CharField(max_length=255, null=True)  # noqa: DJ001
    source_type = models.CharField(max_length=16)
    package_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    kody_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    source_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    workflow_name = models.CharField(max_length=255)
    export_name = models.CharField(max_length=255, null=True)  # noqa: DJ001
    idempotency_key = models.CharField(max_length=255, null=True)  # noqa: DJ001
    run_at = models.DateTimeField()
    plan_date = models.CharField(max_length=16, null=True)  # noqa: DJ001
    status = models.CharField(max_length=16)
    completed_at = models.DateTimeField(null=True)
    last_error = models.TextField(null=True)  # noqa: DJ001

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "workflow_projections"
        indexes = [
            models.Index(fields=["status", "-run_at", "-id"], name="workflow_status_ix"),
            models.Index(fields=["completed_at"], name="workflow_completed_ix"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(source_type__in=["package", "inline"]), name="workflow_source_ok"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "success", "error", "cancelled"]),
                name="workflow_status_ok",
            ),
        ]


class JobRunObservability(ActorModel):
    job_id = models.CharField(max_length=512, primary_key=True, db_collation="C")
    last_run_at = models.DateTimeField(null=True)
    last_run_status = models.CharField(max_length=16, null=True)  # noqa: DJ001
    last_run_error = models.TextField(null=True)  # noqa: DJ001
    last_duration_ms = models.BigIntegerField(null=True)
    run_count = models.BigIntegerField(db_default=0)
    success_count = models.BigIntegerField(db_default=0)
    error_count = models.BigIntegerField(db_default=0)

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "job_run_observability"


class PackageRunSuccess(ActorModel):
    package_id = models.CharField(max_length=255, primary_key=True, db_collation="C")
    success_count = models.BigIntegerField(db_default=0)

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "package_run_successes"


class ActivationMilestone(ActorModel):
    milestone = models.CharField(max_length=64, primary_key=True, db_collation="C")
    reached_at = models.DateTimeField()
    package_id = models.CharField(max_length=255, null=True)  # noqa: DJ001

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "activation_milestones"


class StorageEntry(ActorModel):
    """One key of one StorageRunner bucket; a bucket is every row of one storage id."""

    pk = models.CompositePrimaryKey("storage_id", "key")
    storage_id = models.CharField(max_length=512, db_collation="C")
    key = models.CharField(max_length=512, db_collation="C")
    value = models.JSONField()
    bytes = models.IntegerField()
    updated_at = models.DateTimeField(db_default=Now())

    actor_version = JOBS_ACTORS

    class Meta:
        db_table = "storage_entries"


# The RunLog's tables, which JobManager writes too (``records``): created for a user the first
# time either runs for them (``kody.userschema.tablesets``).
RUN_TABLES = (
    RunLogMeta,
    Run,
    RunLogLine,
    PackageInvocationLedger,
    WorkflowProjection,
    JobRunObservability,
    PackageRunSuccess,
    ActivationMilestone,
)
