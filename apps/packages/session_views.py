"""Account page for repo sessions: the signed-in user's sessions from their own index (source,
age, changed files) with a discard button. Another user's session id is not found."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.entitlements.plans import limit_for
from apps.entitlements.services.plan_cache import cached_plan
from apps.packages.models import EntitySource, SavedPackage, UserRepo
from apps.packages.pages import stable_id as _uid
from apps.packages.services.repo_sessions import sessions
from kody.errors import KodyError


def _source_names(uid: str, source_ids: set[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    rows = EntitySource.objects.filter(user_id=uid, id__in=source_ids)
    by_entity = {(s.entity_kind, s.entity_id): s.id for s in rows}
    for package in SavedPackage.objects.filter(user_id=uid, source_id__in=source_ids):
        names[package.source_id] = package.name
    for repo in UserRepo.objects.filter(user_id=uid, id__in=[e for _k, e in by_entity]):
        source_id = by_entity.get(("repo", repo.id))
        if source_id:
            names[source_id] = f"repo {repo.name}"
    return names


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    uid = _uid(request)
    page = sessions.list_page(uid, "active", 100, None)
    names = _source_names(uid, {s["sourceId"] for s in page["sessions"]})
    rows = [
        {
            **s,
            "source": names.get(s["sourceId"], "(deleted source)"),
            "created": datetime.fromisoformat(s["createdAt"]),
            "expires": datetime.fromisoformat(s["expiresAt"]),
        }
        for s in page["sessions"]
    ]
    context = {
        "sessions": rows,
        "limit": limit_for(cached_plan(uid), "repo_sessions"),
        "more": page["nextCursor"] is not None,
    }
    return render(request, "packages/repo_sessions.html", context)


@login_required
@require_POST
def session_discard(request: HttpRequest, session_id: str) -> HttpResponse:
    try:
        sessions.discard(_uid(request), session_id)
    except KodyError as exc:
        context = {"title": "Session not discarded", "error": exc}
        return render(request, "accounts/problem.html", context, status=exc.status)
    return redirect("packages:repo_sessions")
