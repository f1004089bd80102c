"""Jobs are owned by their users and changed through the JobManager: the admin reads, and
operators may stop (kill switch) or release a job, each audited."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.jobs import models as m
from apps.jobs.actor.manager import JobManager
from apps.jobs.services import insights as job_insights
from kody.adminkit import ReadOnlyModelAdmin
from kody.capabilities.secrecy import redacted_call
from kody.insights import register_panel


def _set_kill_switch(request: HttpRequest, queryset: QuerySet[m.Job], on: bool) -> int:
    from apps.accounts.services import audit

    changed = 0
    for job in queryset.only("id", "user_id"):
        changed += bool(
            JobManager.call(
                job.user_id, "update", job_id=job.id, changes={"kill_switch_enabled": on}
            )
        )
    audit.record(
        category="admin",
        action="jobKillSwitch",
        result="success",
        email=request.user.email,  # type: ignore[union-attr]
        ip=request.META.get("REMOTE_ADDR"),
        client_id=None,
        path="admin:jobs.job",
        reason=f"{'on' if on else 'off'}:{changed}",
    )
    return changed


@admin.register(m.Job)
class JobAdmin(ReadOnlyModelAdmin):
    # A live lease token is a write capability; the raw parameters could hold a secret value
    # written before targets carrying one were refused: the target is shown redacted instead.
    exclude = ("claim_token", "params_json")
    list_display = (
        "name",
        "user_id",
        "enabled",
        "kill_switch_enabled",
        "next_run_at",
        "last_run_status",
        "retry_count",
    )
    list_filter = ("enabled", "kill_switch_enabled", "preserved", "last_run_status")
    search_fields = ("id", "name", "user_id")
    actions = ("stop_jobs", "release_jobs")

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "target"]

    @admin.display(description="Target (secret values redacted)")
    def target(self, obj: m.Job) -> str:
        return json.dumps(redacted_call((obj.params_json or {}).get("target")), sort_keys=True)

    @admin.action(description="Stop the selected jobs (kill switch)")
    def stop_jobs(self, request: HttpRequest, queryset: QuerySet[m.Job]) -> None:
        changed = _set_kill_switch(request, queryset, True)
        self.message_user(request, f"Stopped {changed} job(s).", messages.SUCCESS)

    @admin.action(description="Release the kill switch of the selected jobs")
    def release_jobs(self, request: HttpRequest, queryset: QuerySet[m.Job]) -> None:
        changed = _set_kill_switch(request, queryset, False)
        self.message_user(request, f"Released {changed} job(s).", messages.SUCCESS)


@admin.register(m.ArchivedJobArtifact)
class ArchivedJobArtifactAdmin(ReadOnlyModelAdmin):
    list_display = ("job_id", "user_id", "retain_until")
    search_fields = ("job_id", "user_id")


@admin.register(m.JobsWorkerState)
class JobsWorkerStateAdmin(admin.ModelAdmin):
    """Operational switches: ``scheduler_kill_switch`` = ``on`` stops every scheduler."""

    list_display = ("key", "value", "updated_at")
    fields = ("key", "value")


register_panel(
    "workflow_status", "Workflow status totals", job_insights.workflow_status_chart, order=30
)
register_panel(
    "activation_funnel", "Activation funnel", job_insights.activation_funnel_chart, order=35
)
