"""Account pages for OpenAPI bindings: /account/integrations/openapi lists them, and
/account/integrations/openapi/<name> shows one with its operations, with POST twins that
refresh or delete it. The signed-in user's bindings only; another person's name is not found."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.page_writes import guarded_page_write
from apps.packages.pages import problem_page as _problem
from apps.packages.pages import stable_id as _uid
from apps.packages.services.openapi import bindings
from kody.errors import KodyError


@login_required
@require_GET
def binding_list(request: HttpRequest) -> HttpResponse:
    listed = bindings.listing(_uid(request))
    return render(request, "packages/openapi_bindings.html", {"bindings": listed})


@login_required
@require_GET
def binding_list_json(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"bindings": bindings.listing(_uid(request))})


@login_required
@require_GET
def binding_detail(request: HttpRequest, name: str) -> HttpResponse:
    try:
        found = bindings.get(_uid(request), name)
    except KodyError as exc:
        return _problem(request, exc, "OpenAPI binding not found")
    return render(request, "packages/openapi_binding.html", found)


@login_required
@require_POST
@guarded_page_write
def binding_refresh(request: HttpRequest, name: str) -> HttpResponse:
    try:
        bindings.refresh(_uid(request), name)
    except KodyError as exc:
        return _problem(request, exc, "OpenAPI binding not refreshed")
    return redirect("packages:openapi_binding", name=name)


@login_required
@require_POST
@guarded_page_write
def binding_delete(request: HttpRequest, name: str) -> HttpResponse:
    try:
        bindings.delete(_uid(request), name)
    except KodyError as exc:
        return _problem(request, exc, "OpenAPI binding not deleted")
    return redirect("packages:openapi_bindings")
