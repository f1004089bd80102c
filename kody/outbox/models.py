"""The transactional outbox table (public): effects waiting to be relayed."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class OutboxMessage(models.Model):
    """One effect to run after its transaction commits, at least once, by ``key`` once."""

    # The idempotency key: enqueueing the same key again adds nothing (collation "C": a plain
    # byte-wise unique index, no LIKE index).
    key = models.CharField(max_length=255, unique=True, db_collation="C")
    task = models.CharField(max_length=200)  # a registered Celery task name
    payload = models.JSONField(default=dict)  # the task's keyword arguments
    created_at = models.DateTimeField(default=timezone.now)
    # Not relayed before this: a claim pushes it forward by the claim lease, a failure by a
    # backoff. A relay that dies mid-task therefore leaves it to be taken again.
    available_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "kody_outbox"
        indexes = [models.Index(fields=["available_at", "id"], name="kody_outbox_due_ix")]

    def __str__(self) -> str:
        return f"{self.task} [{self.key}]"
