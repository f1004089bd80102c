"""Account pages for memories and secrets. Every view reads and writes the signed-in user's
rows only, through the services; a secret's value is never rendered. Every form that changes
something runs inside the account write guard (``guarded_page_write``), as capabilities do."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.page_writes import guarded_page_write
from apps.packages.models import SavedPackage
from apps.packages.pages import problem_page as _problem
from apps.packages.pages import stable_id as _uid
from apps.packages.services import memories, secrets
from kody.errors import KodyError

MEMORY_PAGE = 200


@login_required
@require_GET
def memory_list(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:200]
    if query:
        rows = [h.memory for h in memories.search(_uid(request), query, limit=50)]
    else:
        rows = memories.recent(_uid(request), limit=MEMORY_PAGE)
    return render(request, "packages/memories.html", {"memories": rows, "query": query})


@login_required
@require_POST
@guarded_page_write
def memory_delete(request: HttpRequest, memory_id: str) -> HttpResponse:
    try:
        memories.delete(_uid(request), memory_id)
    except KodyError as exc:
        return _problem(request, exc, "Memory not deleted")
    return redirect("packages:memories")


@login_required
@require_GET
def secret_list(request: HttpRequest) -> HttpResponse:
    uid = _uid(request)
    packages = SavedPackage.objects.filter(user_id=uid).order_by("name")
    context = {"secrets": secrets.list_secrets(uid), "packages": packages}
    return render(request, "packages/secrets.html", context)


@login_required
@require_POST
@guarded_page_write
def secret_delete(request: HttpRequest) -> HttpResponse:
    try:
        secrets.delete_secret(
            _uid(request),
            name=request.POST.get("name", ""),
            scope=request.POST.get("scope", "user"),
            binding_key=request.POST.get("bindingKey") or None,
        )
    except KodyError as exc:
        return _problem(request, exc, "Secret not deleted")
    return redirect("packages:secrets")


@login_required
@require_POST
@guarded_page_write
def secret_grants(request: HttpRequest) -> HttpResponse:
    """The owner's package grant for a user secret: only here, never through an agent."""
    try:
        secrets.set_allowed_packages(
            _uid(request), request.POST.get("name", ""), request.POST.getlist("packages")
        )
    except KodyError as exc:
        return _problem(request, exc, "Grant not saved")
    return redirect("packages:secrets")


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def secret_approve(request: HttpRequest) -> HttpResponse:
    """The grant a package asked for with ``secretLock``: the owner approves it here, or not.
    Another user's secret or package is not found, whoever holds the link."""
    source = request.POST if request.method == "POST" else request.GET
    name, package_id = source.get("name", ""), source.get("package", "")
    try:
        if request.method == "POST":
            secrets.approve_package(_uid(request), name, package_id)
            return redirect("packages:secrets")
        pending = secrets.grant_request(_uid(request), name, package_id)
    except KodyError as exc:
        return _problem(request, exc, "No such grant to approve")
    return render(request, "packages/secret_approve.html", {"request_": pending})
