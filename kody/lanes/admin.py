"""The operator's lane list (/admin/kody/lanecontrol/): one row per lane, pause without a deploy.

Cadence and budget come from code; last run from ``kody_lane_runs``; the next window from
the dispatcher's own rules (``kody.lanes.control.next_window``). Rows are added for every
declared lane whenever the list opens, so a lane that never ran is listed too.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from kody.lanes import control, registry
from kody.lanes.control import LaneState
from kody.lanes.models import LaneControl, LaneRunRecord

_RUN_COLUMNS = (
    "last_status",
    "last_items",
    "last_duration_ms",
    "last_started_at",
    "last_finished_at",
    "last_dispatched_at",
)


def _stable_id(request: HttpRequest) -> str | None:
    """The signed-in operator as a stable user id (``kody.callers.Principal``)."""
    return getattr(request.user, "stable_user_id", None)


@admin.register(LaneControl)
class LaneControlAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "cadence",
        "lane_state",
        "last_run",
        "last_finished",
        "next_window",
    )
    list_filter = ("paused",)
    search_fields = ("name",)
    actions = ("pause_lanes", "resume_lanes")
    fields = (
        "name",
        "cadence",
        "lane_state",
        "paused",
        "pause_reason",
        "paused_at",
        "paused_by",
        "last_run",
        "last_finished",
        "next_window",
    )
    readonly_fields = (
        "name",
        "cadence",
        "lane_state",
        "paused_at",
        "paused_by",
        "last_run",
        "last_finished",
        "next_window",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a row for a declared lane would come straight back; retired ones stay

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        control.sync()
        return super().changelist_view(request, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[LaneControl]:
        runs = LaneRunRecord.objects.filter(lane=OuterRef("name"))
        columns = {f"run_{c}": Subquery(runs.values(c)[:1]) for c in _RUN_COLUMNS}
        return super().get_queryset(request).annotate(**columns)

    def save_model(self, request: HttpRequest, obj: LaneControl, form: Any, change: bool) -> None:
        if "paused" in form.changed_data:
            obj.paused_at = timezone.now() if obj.paused else None
            obj.paused_by_user_id = _stable_id(request) if obj.paused else None
            if not obj.paused:
                obj.pause_reason = ""
        super().save_model(request, obj, form, change)

    @admin.display(description="paused by")
    def paused_by(self, obj: LaneControl) -> str:
        """The operator's current username, looked up by stable id; a deleted operator's
        id was nulled by their account deletion, so nothing of them is shown."""
        if not obj.paused_by_user_id:
            return "—"
        users = get_user_model()._default_manager.filter(stable_user_id=obj.paused_by_user_id)
        username = users.values_list(get_user_model().USERNAME_FIELD, flat=True).first()
        return username or obj.paused_by_user_id

    @admin.display(description="cadence")
    def cadence(self, obj: LaneControl) -> str:
        declared = registry.get(obj.name)
        return "retired" if declared is None else declared.cadence.value

    @admin.display(description="state")
    def lane_state(self, obj: LaneControl) -> str:
        return control.state(obj).value

    @admin.display(description="last run")
    def last_run(self, obj: LaneControl) -> str:
        status = getattr(obj, "run_last_status", None)
        if not status:
            return "never finished" if getattr(obj, "run_last_started_at", None) else "never ran"
        duration = getattr(obj, "run_last_duration_ms", None)
        return f"{status}, {obj.run_last_items} items, {duration} ms"  # type: ignore[attr-defined]

    @admin.display(description="finished")
    def last_finished(self, obj: LaneControl) -> Any:
        return getattr(obj, "run_last_finished_at", None) or "—"

    @admin.display(description="next window")
    def next_window(self, obj: LaneControl) -> Any:
        current = control.state(obj)
        if current is LaneState.RETIRED:
            return "never (retired)"
        if current is LaneState.PAUSED:
            return "paused"
        declared = registry.get(obj.name)
        assert declared is not None
        found = control.next_window(
            declared,
            timezone.now(),
            last_started=getattr(obj, "run_last_started_at", None),
            last_dispatched=getattr(obj, "run_last_dispatched_at", None),
        )
        return found or "—"

    @admin.action(description="Pause selected lanes (they skip their runs until resumed)")
    def pause_lanes(self, request: HttpRequest, queryset: QuerySet[LaneControl]) -> None:
        names = list(queryset.values_list("name", flat=True))
        changed = control.pause(names, by=_stable_id(request))
        for obj in queryset.filter(name__in=names):
            self.log_change(request, obj, "Paused")
        self.message_user(request, f"Paused {changed} lane(s).", messages.SUCCESS)

    @admin.action(description="Resume selected lanes")
    def resume_lanes(self, request: HttpRequest, queryset: QuerySet[LaneControl]) -> None:
        names = list(queryset.values_list("name", flat=True))
        changed = control.resume(names)
        for obj in queryset.filter(name__in=names):
            self.log_change(request, obj, "Resumed")
        self.message_user(request, f"Resumed {changed} lane(s).", messages.SUCCESS)
