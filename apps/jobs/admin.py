"""Jobs are owned by their users and changed through the JobManager: the admin only reads."""

from __future__ import annotations

from django.contrib import admin

from apps.jobs import models as m
from kody.adminkit import ReadOnlyModelAdmin


@admin.register(m.Job)
class JobAdmin(ReadOnlyModelAdmin):
    exclude = ("claim_token",)  # a live lease token is a write capability
    list_display = ("name", "user_id", "enabled", "kill_switch_enabled", "next_run_at")
    list_filter = ("enabled", "kill_switch_enabled", "preserved", "last_run_status")
    search_fields = ("id", "name", "user_id")


@admin.register(m.ArchivedJobArtifact)
class ArchivedJobArtifactAdmin(ReadOnlyModelAdmin):
    list_display = ("job_id", "user_id", "retain_until")
    search_fields = ("job_id", "user_id")


@admin.register(m.JobsWorkerState)
class JobsWorkerStateAdmin(ReadOnlyModelAdmin):
    allow_delete = True  # clearing a cooldown is an operator action
    list_display = ("key", "updated_at")
