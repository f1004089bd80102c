"""/account/jobs and /account/activity: thin views over the jobs services (owner only)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.models import User
from apps.accounts.page_writes import guarded_page_write
from apps.jobs import schedules, services
from apps.jobs.services import runs
from kody.errors import KodyError

PAGE = 50


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _error(request: HttpRequest, exc: KodyError) -> HttpResponse:
    return render(request, "jobs/error.html", {"error": exc}, status=exc.status)


def _row(job: services.JobJson) -> dict[str, object]:
    return {**job, "describe": schedules.describe(job["schedule"])}


@never_cache
@login_required
@require_GET
def jobs_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    cursor = request.GET.get("after") or None
    page = services.list_jobs(user.stable_user_id, cursor=cursor, limit=PAGE)
    return render(
        request,
        "jobs/jobs.html",
        {"jobs": [_row(j) for j in page["jobs"]], "next_cursor": page["nextCursor"]},
    )


@never_cache
@login_required
@require_GET
def job_page(request: HttpRequest, job_id: str) -> HttpResponse:
    user = _user(request)
    try:
        job = services.get_job(user.stable_user_id, job_id)
        history = runs.list_runs(user.stable_user_id, job_id=job_id, surface="job", limit=20)
    except KodyError as exc:
        return _error(request, exc)
    observed = runs.job_observability(user.stable_user_id, [job_id]).get(job_id)
    upcoming = []
    if job["enabled"] and job["nextRunAt"]:
        zone = schedules.zone(job["timezone"])
        first = services.owned(user.stable_user_id, job_id).next_run_at
        upcoming = [first.astimezone(zone)] + [
            at.astimezone(zone)
            for at in schedules.upcoming(job["schedule"], job["timezone"], first, 4)
        ]
    context = {
        "job": _row(job),
        "runs": history["runs"],
        "observed": observed,
        "upcoming": upcoming,
    }
    return render(request, "jobs/job.html", context)


def _act(request: HttpRequest, job_id: str, action: str) -> HttpResponse:
    user = _user(request)
    try:
        if action == "pause":
            services.set_enabled(user.stable_user_id, job_id, False)
            messages.success(request, "Job paused.")
        elif action == "resume":
            services.set_enabled(user.stable_user_id, job_id, True)
            messages.success(request, "Job resumed.")
        else:
            result = services.run_now(user.stable_user_id, job_id)
            text = "It is already running." if result["alreadyRunning"] else "It runs shortly."
            messages.success(request, text)
    except KodyError as exc:
        return _error(request, exc)
    return redirect("jobs:job", job_id=job_id)


@login_required
@require_POST
@guarded_page_write
def job_pause(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, "pause")


@login_required
@require_POST
@guarded_page_write
def job_resume(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, "resume")


@login_required
@require_POST
@guarded_page_write
def job_run(request: HttpRequest, job_id: str) -> HttpResponse:
    return _act(request, job_id, "run")


@never_cache
@login_required
@require_GET
def activity_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    try:
        page = runs.list_runs(
            user.stable_user_id, cursor=request.GET.get("after") or None, limit=PAGE
        )
    except KodyError as exc:
        return _error(request, exc)
    return render(
        request, "jobs/activity.html", {"runs": page["runs"], "next_cursor": page["nextCursor"]}
    )


@never_cache
@login_required
@require_GET
def run_page(request: HttpRequest, run_id: str) -> HttpResponse:
    try:
        run = runs.get_run(_user(request).stable_user_id, run_id)
    except KodyError as exc:
        return _error(request, exc)
    return render(request, "jobs/run.html", {"run": run})
