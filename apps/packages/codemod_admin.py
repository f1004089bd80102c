"""Operator admin for codemod runs: the run and item tables, stop/resume actions, and the
JSON endpoints an operator console calls — ``run.json`` (GET one run with its items; POST to
start a scan, dry run or apply through the admin capabilities, so the call is checked and
audited exactly as over the API) and ``run/stop.json`` (POST: stop after the item in hand).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from apps.packages import models as m
from apps.packages.services.codemods import runs
from kody.adminkit import ReadOnlyModelAdmin
from kody.capabilities import Context, invoke
from kody.errors import InvalidInput, KodyError

START = {
    "scan": "adminPackageCodemodScan",
    "dry_run": "adminPackageCodemodDryRun",
    "apply": "adminPackageCodemodApply",
}
MAX_BODY = 64 * 1024


def _audit(request: HttpRequest, action: str, reason: str) -> None:
    from apps.accounts.services import audit

    audit.record_first(
        action=action,
        email=request.user.email,  # type: ignore[union-attr]
        ip=request.META.get("REMOTE_ADDR"),
        client_id=None,
        surface="ui",
        reason=reason,
    )


def _enqueue(run_id: str) -> None:
    from apps.packages.tasks import process_codemod_run

    transaction.on_commit(lambda: process_codemod_run.delay(run_id))


def _error(exc: KodyError) -> JsonResponse:
    return JsonResponse({"error": exc.as_dict()}, status=exc.status)


def _body(request: HttpRequest) -> dict[str, Any]:
    if len(request.body) > MAX_BODY:
        raise InvalidInput("The request body is too large.")
    try:
        data = json.loads(request.body or b"{}")
    except ValueError as exc:
        raise InvalidInput("The body must be a JSON object.") from exc
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.")
    return data


@admin.register(m.PackageCodemodRun)
class PackageCodemodRunAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "codemod_id", "mode", "status", "initiated_by_user_id", "created_at")
    list_filter = ("mode", "status")
    search_fields = ("id", "codemod_id")
    actions = ("stop_runs", "resume_runs")

    def get_urls(self) -> list[Any]:
        run_view = self.admin_site.admin_view(self.run_json)
        stop_view = self.admin_site.admin_view(self.stop_json)
        return [
            path("run.json", run_view, name="packages_codemod_run_json"),
            path("run/stop.json", stop_view, name="packages_codemod_run_stop_json"),
            *super().get_urls(),
        ]

    @admin.action(description="Stop the selected runs (after the item in hand)")
    def stop_runs(self, request: HttpRequest, queryset: QuerySet[m.PackageCodemodRun]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        _audit(request, "codemodRunStop", f"runs={len(ids)}")
        stopped = sum(runs.stop(r).status == runs.STOPPED for r in queryset)
        self.message_user(request, f"Stopped {stopped} run(s).", messages.SUCCESS)

    @admin.action(description="Resume the selected stopped runs")
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[m.PackageCodemodRun]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        _audit(request, "codemodRunResume", f"runs={len(ids)}")
        resumed = 0
        for run in queryset:
            if runs.resume(run).status == runs.PENDING:
                _enqueue(run.id)
                resumed += 1
        self.message_user(request, f"Resumed {resumed} run(s).", messages.SUCCESS)

    @staticmethod
    def _context(request: HttpRequest) -> Context:
        return Context(user=request.user, surface="ui", ip=request.META.get("REMOTE_ADDR"))  # type: ignore[arg-type]

    def run_json(self, request: HttpRequest) -> JsonResponse:
        return require_http_methods(["GET", "POST"])(self._run_json)(request)

    def _run_json(self, request: HttpRequest) -> JsonResponse:
        try:
            if request.method == "GET":
                run = m.PackageCodemodRun.objects.filter(id=request.GET.get("id", "")).first()
                if run is None:
                    raise runs.RunNotFound()
                items = m.PackageCodemodRunItem.objects.filter(run_id=run.id).order_by("id")
                return JsonResponse(
                    {"run": runs.summary(run), "items": [runs.item_view(i) for i in items[:500]]}
                )
            data = _body(request)
            mode = data.pop("mode", None)
            if mode not in START:
                raise InvalidInput("mode must be scan, dry_run or apply.")
            return JsonResponse(invoke(START[mode], self._context(request), data))
        except KodyError as exc:
            return _error(exc)

    def stop_json(self, request: HttpRequest) -> JsonResponse:
        return require_POST(self._stop_json)(request)

    def _stop_json(self, request: HttpRequest) -> JsonResponse:
        try:
            run_id = _body(request).get("id")
            run = m.PackageCodemodRun.objects.filter(id=str(run_id or "")[:64]).first()
            if run is None:
                raise runs.RunNotFound()
            _audit(request, "codemodRunStop", f"run={run.id}")
            return JsonResponse({"run": runs.summary(runs.stop(run))})
        except KodyError as exc:
            return _error(exc)


@admin.register(m.PackageCodemodRunItem)
class PackageCodemodRunItemAdmin(ReadOnlyModelAdmin):
    list_display = ("run_id", "kody_id", "user_id", "status", "after_commit")
    list_filter = ("status",)
    search_fields = ("run_id", "user_id", "package_id")
