"""Job schedule metadata (the original JOBS_DB tables), ordinary models in ``public``.

Run history, terminal errors and counters live in the per-user RunLog actor; these rows keep
the schedule, the lease, the repo source pointer and last_run_* as retention anchors only.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.timezone import now

from kody.fields import new_id, stable_user_id


class Job(models.Model):
    # Package-owned jobs use 'package-job:{packageId}:{jobName}', so ids can be long.
    id = models.CharField(max_length=512, primary_key=True, default=new_id)
    user_id = stable_user_id()
    name = models.CharField(max_length=255)
    source_id = models.CharField(max_length=64)
    published_commit = models.CharField(max_length=64, null=True, blank=True)
    repo_check_policy_json = models.JSONField(null=True, blank=True)
    storage_id = models.CharField(max_length=512)
    params_json = models.JSONField(null=True, blank=True)
    schedule_json = models.JSONField()
    timezone = models.CharField(max_length=64)
    enabled = models.BooleanField(default=True)
    kill_switch_enabled = models.BooleanField(default=False)
    caller_context_json = models.JSONField()
    created_at = models.DateTimeField(default=now)
    updated_at = models.DateTimeField(auto_now=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run_status = models.CharField(max_length=32, null=True, blank=True)
    next_run_at = models.DateTimeField()
    # Skips platform auto-cleanup; independent of expires_at.
    preserved = models.BooleanField(default=False)
    claim_token = models.CharField(max_length=64, null=True, blank=True)
    running_since = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The delivery of the claim's batch that started it (``JobManager.start``): NULL from the
    # claim until one does; another delivery of the same batch finds it taken and skips it.
    # Every claim (fresh token) clears it, so a run whose lease ran out is retried.
    started_by = models.CharField(max_length=64, null=True, blank=True)
    claimed_scheduled_for = models.DateTimeField(null=True, blank=True)
    retry_scheduled_for = models.DateTimeField(null=True, blank=True)
    retry_count = models.IntegerField(default=0)
    last_completed_scheduled_for = models.DateTimeField(null=True, blank=True)
    # When reached the scheduler skips the job and disables it; it never deletes the row.
    expires_at = models.DateTimeField(null=True, blank=True)
    # Why the scheduler disabled the job (``apps.jobs.grants``: ``token_revoked``,
    # ``owner_suspended``, …); NULL while it may run. Re-enabling with a live grant clears it.
    disabled_reason = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001

    class Meta:
        db_table = "jobs"
        indexes = [
            models.Index(
                fields=["user_id", "enabled", "kill_switch_enabled", "next_run_at"],
                name="jobs_user_next_run_ix",
            ),
            models.Index(fields=["user_id", "name"], name="jobs_user_name_ix"),
            models.Index(fields=["source_id"], name="jobs_source_ix"),
            models.Index(
                fields=["preserved", "enabled", "last_run_at", "updated_at"],
                name="jobs_retention_ix",
            ),
            models.Index(
                fields=["user_id", "enabled", "kill_switch_enabled", "expires_at", "next_run_at"],
                name="jobs_user_expiry_ix",
            ),
            # The missed-alarm watchdog looks for due jobs across all users.
            models.Index(
                fields=["next_run_at"],
                condition=Q(enabled=True, kill_switch_enabled=False),
                name="jobs_due_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(retry_count__gte=0), name="jobs_retry_count_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ArchivedJobArtifact(models.Model):
    """Artifacts of a deleted job kept until retain_until (exempt from the global age prunes)."""

    id = models.CharField(max_length=64, primary_key=True, default=new_id)
    job_id = models.CharField(max_length=512, unique=True)
    user_id = stable_user_id(db_index=True)
    source_id = models.CharField(max_length=64)
    published_commit = models.CharField(max_length=64)
    storage_id = models.CharField(max_length=512)
    retain_until = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(default=now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "archived_job_artifacts"

    def __str__(self) -> str:
        return self.job_id


# JobsWorkerState key: value "on" stops every user's scheduler (claims nothing) until cleared.
KILL_SWITCH_KEY = "scheduler_kill_switch"


class JobsWorkerState(models.Model):
    """Operational key/value state of the scheduler (e.g. the watchdog cooldown)."""

    key = models.CharField(max_length=128, primary_key=True)
    value = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "jobs_worker_state"
        verbose_name_plural = "jobs worker state"

    def __str__(self) -> str:
        return self.key
