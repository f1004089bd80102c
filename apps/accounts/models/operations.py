"""Operator bookkeeping keyed by stable user ids: lease repairs and MCP session index."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from kody.fields import stable_user_id, text_id


class AccountWriteLeaseRepair(models.Model):
    """Audit log of an admin force-releasing a stuck account write lease."""

    id = text_id()
    target_user_id = stable_user_id(db_index=True)
    lease_token = models.CharField(max_length=255)
    lease_holder = models.CharField(max_length=255)
    lease_acquired_at = models.DateTimeField()
    repaired_by_user_id = stable_user_id()
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "account_write_lease_repairs"

    def __str__(self) -> str:
        return f"lease repair {self.id}"


class McpAgentSession(models.Model):
    """Which agents (MCP clients) have used ``/mcp`` for a user: one row per user and calling
    principal (an OAuth client id, or ``pat:<id>``), first seen (``created_at``) and last seen.

    ``/mcp`` stays stateless: the row is written when a token's debounced last-use stamp is,
    at most every five minutes per token, never per request. ``do_id`` keeps the seed's name
    (the MCP Durable Object id there); here it is a hash of the user and the principal.
    """

    do_id = models.CharField(max_length=255, primary_key=True)
    user_id = stable_user_id(db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    client_id = models.CharField(max_length=255, blank=True, default="")
    client_name = models.CharField(max_length=255, blank=True, default="")
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mcp_agent_sessions"

    def __str__(self) -> str:
        return self.do_id


class DeletionStatus(models.TextChoices):
    RUNNING = "running"
    RETAINED = "retained"  # stopped by a failure; the account and its data are kept for retry
    COMPLETE = "complete"


class AccountDeletion(models.Model):
    """One account deletion as a durable, resumable job: which steps ran, with what counts.

    ``subject_user_id`` holds the stable id only while the deletion runs; it is cleared when
    the deletion completes, so the finished record keeps no identifier of the person.
    """

    id = models.BigAutoField(primary_key=True)
    subject_user_id = models.CharField(max_length=64, null=True, blank=True)
    subject_db_id = models.BigIntegerField(null=True, blank=True)
    requested_by = models.CharField(max_length=32)  # self | operator | lane
    status = models.CharField(
        max_length=16, choices=DeletionStatus.choices, default=DeletionStatus.RUNNING
    )
    step = models.CharField(max_length=32, default="mark")
    steps = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=200, blank=True, default="")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "account_deletions"
        constraints = [
            models.UniqueConstraint(
                fields=["subject_user_id"],
                condition=models.Q(status__in=["running", "retained"]),
                name="account_deletions_one_open_per_user",
            ),
            models.CheckConstraint(
                condition=models.Q(status="complete", subject_user_id__isnull=True)
                | ~models.Q(status="complete"),
                name="account_deletions_complete_forgets_subject",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status__in=["running", "retained"]),
                name="account_deletions_due_ix",
            )
        ]

    def __str__(self) -> str:
        return f"deletion {self.pk} ({self.status}, step {self.step})"
