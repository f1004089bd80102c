"""Account pages for packages and repos: /account/packages (and a repo list) and one
package's detail — source tree at the published commit, HEAD, hide/private toggles, and for a
locked package the owner's approval of the HEAD commit. The signed-in user's rows only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.packages.pages import problem_page as _problem
from apps.packages.pages import stable_id as _uid
from apps.packages.services import packages, repos
from apps.packages.services.git import read_tree
from kody.callers import account_policy
from kody.errors import KodyError

TREE_LIMIT = 500


@login_required
@require_GET
def package_list(request: HttpRequest) -> HttpResponse:
    uid = _uid(request)
    context = {
        "packages": packages.list_page(uid, limit=100)["packages"],
        "repos": repos.list_page(uid, limit=100)["repos"],
    }
    return render(request, "packages/packages.html", context)


@login_required
@require_GET
def package_detail(request: HttpRequest, package_id: str) -> HttpResponse:
    try:
        package = packages.owned(_uid(request), package_id)
    except KodyError as exc:
        return _problem(request, exc, "Package not found")
    source = packages.source_of(package)
    head = packages.head_of(source)
    tree = []
    if source.published_commit:
        files = read_tree(source.repo_id, source.published_commit)
        tree = [{"path": p, "size": len(d)} for p, d in sorted(files.items())][:TREE_LIMIT]
    context = {
        "package": packages.to_json(package, source),
        "head": head,
        "pending": bool(head and head != source.published_commit),
        "tree": tree,
    }
    return render(request, "packages/package_detail.html", context)


@login_required
@require_POST
def package_settings(request: HttpRequest, package_id: str) -> HttpResponse:
    wanted = request.POST.get("setting", "")
    value = request.POST.get("value") == "on"
    flags = {"hidden": "hidden", "private": "is_private", "locked": "locked"}
    if wanted not in flags:
        return HttpResponse("unknown setting", status=400)
    try:
        with account_policy().write_guard(request.user, "ui:packageSettings"):
            packages.update(_uid(request), package_id, **{flags[wanted]: value})
    except KodyError as exc:
        return _problem(request, exc, "Package not changed")
    return redirect("packages:package_detail", package_id=package_id)


@login_required
@require_POST
def package_approve(request: HttpRequest, package_id: str) -> HttpResponse:
    """The owner approves one commit (the HEAD they were shown) of a locked package."""
    commit = request.POST.get("commit", "")
    try:
        package = packages.owned(_uid(request), package_id)
        source = packages.source_of(package)
        if not commit or commit != packages.head_of(source):
            return HttpResponse("That commit is no longer the branch head; reload.", status=409)
        with account_policy().write_guard(request.user, "ui:packageApprove"):
            result = packages.publish_external_push(request.user, package_id, approved=True)
    except KodyError as exc:
        return _problem(request, exc, "Commit not published")
    if result.status == "rejected":
        context = {"package": packages.to_json(package), "checks": result.checks}
        return render(request, "packages/package_rejected.html", context, status=422)
    return redirect("packages:package_detail", package_id=package_id)
