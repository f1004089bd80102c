from __future__ import annotations

from django.db import models

from kody.fields import stable_user_id


class LaneCursor(models.Model):
    """Where a lane's keyset scan stopped, so the next run continues from there."""

    lane = models.CharField(max_length=100, primary_key=True)
    position = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "kody_lane_cursors"

    def __str__(self) -> str:
        return f"{self.lane}@{self.position}"


class LaneRunStatus(models.TextChoices):
    OK = "ok"
    FAILED = "failed"
    RETRYING = "retrying"


class LaneRunRecord(models.Model):
    """The last run of each lane, for the operator health page: one row per lane name, written
    by the runner with one upsert when a run starts and one when it ends. It holds counters and
    an exception class name only, never a message (messages can carry user content)."""

    lane = models.CharField(max_length=100, primary_key=True)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(
        max_length=10, choices=LaneRunStatus.choices, blank=True, default="", db_default=""
    )
    last_items = models.BigIntegerField(default=0, db_default=0)
    last_batches = models.IntegerField(default=0, db_default=0)
    last_duration_ms = models.BigIntegerField(null=True, blank=True)
    last_budget_exhausted = models.BooleanField(default=False, db_default=False)
    last_error_class = models.CharField(max_length=200, blank=True, default="", db_default="")
    consecutive_failures = models.IntegerField(default=0, db_default=0)
    # Counted when a run starts, so a run that died without finishing still shows up.
    total_runs = models.BigIntegerField(default=0, db_default=0)
    # Claimed by the dispatcher once per hourly/daily window, so a window is enqueued once
    # even when beat ticks twice in it or a catch-up finds the run still queued.
    last_dispatched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "kody_lane_runs"

    def __str__(self) -> str:
        return f"{self.lane}: {self.last_status or 'never finished'}"


class LaneControl(models.Model):
    """The operator's switch for one lane, edited in /admin/ (no deploy needed).

    One row per lane name the registry has ever declared; rows are added when the dispatcher
    ticks or an operator opens the lane list. Cadence and budget stay in code; a row whose name
    code no longer declares is shown as retired and never runs."""

    name = models.CharField(max_length=100, primary_key=True)
    paused = models.BooleanField(default=False, db_default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    # The pausing operator's stable id, not their username: account deletion nulls it
    # (apps/accounts/surfaces.py), so no name outlives the person.
    paused_by_user_id = stable_user_id(null=True, blank=True)
    pause_reason = models.CharField(max_length=500, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "kody_lanes"
        verbose_name = "lane"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
