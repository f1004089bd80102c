"""Account pages for OAuth integrations: /account/integrations (+ /apps/<appSlug>,
/<integrationName>) and the OAuth callback, plus the public logo/mark images.

Every view reads and writes the signed-in user's rows only, through the integration services;
a token or client secret is never rendered (the forms take a new client secret, write-only).
Writes run inside the account write guard, the callback (a GET that stores tokens) included.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.utils.cache import patch_cache_control
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.models import PlatformProviderMark
from apps.accounts.page_writes import guarded_page_write
from apps.accounts.policy import write_guard
from apps.packages.models import SavedPackage, UserIntegration
from apps.packages.pages import problem_page as _problem
from apps.packages.pages import stable_id as _uid
from apps.packages.services.integrations import (
    connections,
    flow,
    oauth_apps,
    platform_apps,
    registry,
)
from kody.blobs.buckets import bucket
from kody.errors import InvalidInput, KodyError

log = logging.getLogger(__name__)
APP_FIELDS = (
    "slug",
    "provider",
    "label",
    "clientId",
    "clientSecret",
    "authorizeUrl",
    "tokenUrl",
    "apiBaseUrl",
    "flow",
    "tokenExchangeStyle",
    "scopeSeparator",
)
LOGO_MAX_AGE = 3600


def _words(text: str) -> list[str]:
    return [w for w in text.replace(",", " ").split() if w]


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def integration_list(request: HttpRequest) -> HttpResponse:
    uid = _uid(request)
    if request.method == "POST":
        try:
            return _post_list(request, uid)
        except KodyError as exc:
            return _problem(request, exc, "Nothing was changed")
    return render(request, "packages/integrations.html", _list_context(uid))


def _list_context(uid: str) -> dict[str, Any]:
    rows = connections.list_rows(uid)
    return {
        "integrations": [connections.view(uid, r) for r in rows],
        "apps": [oauth_apps.view(a) for a in oauth_apps.list_apps(uid)],
        "platform_apps": [platform_apps.view(a) for a in platform_apps.list_enabled()],
        "providers": registry.search("", limit=registry.MAX_RESULTS),
    }


def _json_problem(exc: KodyError) -> JsonResponse:
    return JsonResponse({"error": exc.as_dict()}, status=exc.status)


@never_cache
@login_required
@require_GET
def integration_list_json(request: HttpRequest) -> JsonResponse:
    """What /account/integrations shows: connections, own apps, enabled platform apps and the
    provider registry. Token and client-secret values are never in it."""
    context = _list_context(_uid(request))
    return JsonResponse(
        {
            "integrations": context["integrations"],
            "apps": context["apps"],
            "platformApps": context["platform_apps"],
            "providers": context["providers"],
        }
    )


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def integration_detail_json(request: HttpRequest, name: str) -> JsonResponse:
    """GET: the integration. POST (``action`` as on the page: ``usage`` with ``usageMode`` and
    ``allowedPackages``, ``refresh``, ``reconnect`` — answers ``authorizeUrl`` —, ``delete``)."""
    uid = _uid(request)
    try:
        if request.method == "POST":
            with write_guard(request.user, "ui:integration_json"):
                answer = _json_action(request, uid, name)
            if answer is not None:
                return JsonResponse(answer)
        row = connections.get(uid, name)
    except KodyError as exc:
        return _json_problem(exc)
    return JsonResponse({"integration": connections.view(uid, row)})


def _json_action(request: HttpRequest, uid: str, name: str) -> dict[str, Any] | None:
    action = request.POST.get("action")
    if action == "delete":
        connections.delete(uid, name)
        return {"deleted": True, "name": name}
    if action == "usage":
        packages = request.POST.getlist("allowedPackages")[: connections.MAX_ALLOWED_PACKAGES]
        connections.set_usage(uid, name, request.POST.get("usageMode", ""), packages)
    elif action == "refresh":
        flow.refresh(uid, name)
    elif action == "reconnect":
        row = connections.get(uid, name)
        started = flow.begin(uid, row, connections.app_of(uid, row))
        return {"authorizeUrl": started.authorize_url}
    else:
        raise InvalidInput(
            "action must be one of: usage, refresh, reconnect, delete.",
            details={"field": "action"},
        )
    return None


@never_cache
@login_required
@require_GET
def oauth_app_detail_json(request: HttpRequest, app_slug: str) -> JsonResponse:
    uid = _uid(request)
    try:
        app = oauth_apps.get_app(uid, app_slug)
    except KodyError as exc:
        return _json_problem(exc)
    return JsonResponse({"app": oauth_apps.view(app), "usedBy": _used_by(uid, app.slug)})


def _used_by(uid: str, slug: str) -> list[str]:
    rows = UserIntegration.objects.filter(user_id=uid, app_slug=slug).order_by("name")
    return [r.name for r in rows]


def _post_list(request: HttpRequest, uid: str) -> HttpResponse:
    post = request.POST
    if post.get("action") == "app":
        fields: dict[str, Any] = {k: post[k] for k in APP_FIELDS if post.get(k)}
        app = oauth_apps.save_app(uid, fields)
        return redirect("packages:integration_app", app_slug=app.slug)
    # Connect: save the integration and send the browser to the provider.
    target = post.get("app", "")
    kind, _, slug = target.partition(":")
    fields = {
        "name": post.get("name", ""),
        "appSlug": slug if kind == "user" else None,
        "platformAppSlug": slug if kind == "platform" else None,
        "scopes": _words(post.get("scopes", "")) if post.get("scopes") else None,
        "requiredHosts": _words(post.get("requiredHosts", ""))
        if post.get("requiredHosts")
        else None,
        "accountLabel": post.get("accountLabel", ""),
    }
    planned = connections.plan(uid, {k: v for k, v in fields.items() if v is not None})
    row = connections.write(uid, planned, None)
    started = flow.begin(uid, row, connections.app_of(uid, row))
    return HttpResponseRedirect(started.authorize_url)


@login_required
@require_GET
def integration_callback(request: HttpRequest) -> HttpResponse:
    """The provider sends the browser back here; the state must be the signed-in user's."""
    uid = _uid(request)
    try:
        with write_guard(request.user, "ui:integration_callback"):
            row = flow.complete(
                uid,
                request.GET.get("state", ""),
                request.GET.get("code"),
                request.GET.get("error"),
            )
    except KodyError as exc:
        return _problem(request, exc, "The integration was not connected")
    return redirect("packages:integration_detail", name=row.name)


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def integration_detail(request: HttpRequest, name: str) -> HttpResponse:
    uid = _uid(request)
    try:
        if request.method == "POST":
            return _post_detail(request, uid, name)
        row = connections.get(uid, name)
    except KodyError as exc:
        return _problem(request, exc, "No such integration")
    packages = SavedPackage.objects.filter(user_id=uid).order_by("name").only("id", "name")
    context = {
        "integration": connections.view(uid, row),
        "packages": [{"id": p.id, "name": p.name} for p in packages],
    }
    return render(request, "packages/integration_detail.html", context)


def _post_detail(request: HttpRequest, uid: str, name: str) -> HttpResponse:
    action = request.POST.get("action")
    if action == "delete":
        connections.delete(uid, name)
        return redirect("packages:integrations")
    if action == "usage":
        connections.set_usage(
            uid,
            name,
            request.POST.get("usageMode", ""),
            request.POST.getlist("allowedPackages")[: connections.MAX_ALLOWED_PACKAGES],
        )
        return redirect("packages:integration_detail", name=name)
    if action == "refresh":
        flow.refresh(uid, name)
        return redirect("packages:integration_detail", name=name)
    if action == "reconnect":
        row = connections.get(uid, name)
        started = flow.begin(uid, row, connections.app_of(uid, row))
        return HttpResponseRedirect(started.authorize_url)
    raise Http404("Unknown action.")


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def oauth_app_detail(request: HttpRequest, app_slug: str) -> HttpResponse:
    uid = _uid(request)
    try:
        if request.method == "POST":
            return _post_app(request, uid, app_slug)
        app = oauth_apps.get_app(uid, app_slug)
    except KodyError as exc:
        return _problem(request, exc, "No such OAuth app")
    context = {"app": oauth_apps.view(app), "used_by": _used_by(uid, app.slug)}
    return render(request, "packages/integration_app.html", context)


def _post_app(request: HttpRequest, uid: str, app_slug: str) -> HttpResponse:
    if request.POST.get("action") == "delete":
        oauth_apps.delete_app(uid, app_slug)
        return redirect("packages:integrations")
    oauth_apps.rotate_credentials(
        uid,
        app_slug,
        client_id=request.POST.get("clientId") or None,
        client_secret=request.POST.get("clientSecret") or None,
    )
    return redirect("packages:integration_app", app_slug=app_slug)


def _image(data: bytes | None) -> HttpResponse:
    if data is None:
        raise Http404("No logo.")
    response = HttpResponse(data, content_type="image/webp")
    response["X-Content-Type-Options"] = "nosniff"
    patch_cache_control(response, public=True, max_age=LOGO_MAX_AGE)
    return response


@require_GET
def platform_app_logo(request: HttpRequest, slug: str) -> HttpResponse:
    return _image(platform_apps.read_logo(slug))


@require_GET
def provider_mark(request: HttpRequest, slug: str) -> HttpResponse:
    mark = PlatformProviderMark.objects.filter(slug=slug).first()
    if mark is None or not mark.logo_key:
        raise Http404("No mark.")
    try:
        with bucket(platform_apps.LOGO_BUCKET).open(mark.logo_key, "rb") as handle:
            return _image(handle.read())
    except FileNotFoundError:
        raise Http404("No mark.") from None
