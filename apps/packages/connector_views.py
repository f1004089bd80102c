"""Account pages for remote connectors: the list with each one's status, registering one (name
and shared secret), and one connector's page (attach/detach, enable/disable, a new secret,
remove). The shared secret is written here and never shown again. Another person's connector
is not found."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.page_writes import guarded_page_write
from apps.accounts.policy import write_guard
from apps.packages.pages import problem_page as _problem
from apps.packages.pages import stable_id as _uid
from apps.packages.services import remote_connectors
from kody.errors import InvalidInput, KodyError

FLAGS = {
    "attach": {"attached": True},
    "detach": {"attached": False},
    "enable": {"enabled": True},
    "disable": {"enabled": False},
}


@login_required
@require_GET
def connector_list(request: HttpRequest) -> HttpResponse:
    connectors = remote_connectors.listing(_uid(request))
    return render(request, "packages/remote_connectors.html", {"connectors": connectors})


@never_cache
@login_required
@require_GET
def connector_list_json(request: HttpRequest) -> JsonResponse:
    """What /account/remote-connectors shows; the shared secret is never in it."""
    return JsonResponse({"connectors": remote_connectors.listing(_uid(request))})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def connector_detail_json(request: HttpRequest, instance_id: str) -> JsonResponse:
    """GET: the connector. POST (``action`` as on the page; ``sharedSecret`` with ``secret``):
    the change, answered with the connector as it is now (``remove``: what was removed)."""
    uid = _uid(request)
    try:
        if request.method == "POST":
            with write_guard(request.user, "ui:remote_connector_json"):
                removed = _apply_action(request, uid, instance_id)
            if removed is not None:
                return JsonResponse(removed)
        connector = remote_connectors.get(uid, instance_id)
    except KodyError as exc:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    return JsonResponse({"connector": connector})


def _apply_action(request: HttpRequest, uid: str, instance_id: str) -> dict[str, Any] | None:
    """The page's and the JSON twin's POST ``action``; what was removed, else None."""
    action = request.POST.get("action", "")
    if action == "remove":
        return dict(remote_connectors.remove(uid, instance_id))
    if action == "secret":
        secret = request.POST.get("sharedSecret", "")[:300]
        remote_connectors.update(uid, instance_id, secret=secret)
    elif action in FLAGS:
        remote_connectors.update(uid, instance_id, **FLAGS[action])
    else:
        raise InvalidInput(
            "action must be one of: remove, secret, " + ", ".join(FLAGS) + ".",
            details={"field": "action"},
        )
    return None


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def connector_new(request: HttpRequest) -> HttpResponse:
    form = {"instanceId": "", "attached": True}
    error = None
    if request.method == "POST":
        form = {
            "instanceId": request.POST.get("instanceId", "")[:80],
            "attached": request.POST.get("attached") == "on",
        }
        try:
            made = remote_connectors.register(
                _uid(request),
                form["instanceId"],
                request.POST.get("sharedSecret", "")[:300],
                attached=bool(form["attached"]),
            )
        except KodyError as exc:
            error = exc
        else:
            return redirect("packages:remote_connector", instance_id=made["instanceId"])
    context = {"form": form, "error": error, "origin": request.get_host()}
    status = error.status if error else 200
    return render(request, "packages/remote_connector_new.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def connector_detail(request: HttpRequest, instance_id: str) -> HttpResponse:
    uid = _uid(request)
    try:
        if request.method == "POST":
            if request.POST.get("action", "") not in {"remove", "secret", *FLAGS}:
                return HttpResponse("Unknown action.", status=400)
            if _apply_action(request, uid, instance_id) is not None:  # removed
                return redirect("packages:remote_connectors")
            return redirect("packages:remote_connector", instance_id=instance_id)
        connector = remote_connectors.get(uid, instance_id)
    except KodyError as exc:
        return _problem(request, exc, "Remote connector")
    context = {"connector": connector, "username": request.user.username}  # type: ignore[union-attr]
    return render(request, "packages/remote_connector.html", context)
