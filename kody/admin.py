"""The admin's "System health" page (/admin/health/), its JSON twin (/admin/health.json), and
the content-free insights page (/admin/insights/, panels registered by the apps).

Both are staff-only and content-free (see ``kody.health``). They are added in front of the
default admin site's URLs rather than through a custom AdminSite, so every app's
``admin.register`` keeps working unchanged.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import URLPattern, URLResolver, path
from django.utils import timezone
from django.views.decorators.cache import never_cache

from kody import console, health, insights
from kody.lanes import admin as lanes_admin  # noqa: F401  (registers the lane list)


def health_view(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "System health",
        "report": health.report(),
    }
    return render(request, "admin/health.html", context)


@never_cache
def health_json_view(request: HttpRequest) -> JsonResponse:
    # A monitoring client cannot follow a login redirect: answer 403 instead.
    if not admin.site.has_permission(request):
        return JsonResponse({"error": "forbidden"}, status=403)
    return JsonResponse(health.report())


def insights_view(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Insights",
        "panels": insights.panels(timezone.now()),
    }
    return render(request, "admin/insights.html", context)


def tables_view(request: HttpRequest) -> HttpResponse:
    """The raw per-app model list the stock index used to show, one level below the console."""
    context = {
        **admin.site.each_context(request),
        "title": "All tables",
        "app_list": admin.site.get_app_list(request),
        "kody_tables": True,
    }
    return render(request, "admin/index.html", context)


_default_index = admin.site.index


def _index(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
    context = {
        "title": "Operator console",
        "task_groups": console.task_groups(request),
        "attention": console.attention(request),
        **(extra_context or {}),
    }
    return _default_index(request, extra_context=context)


admin.site.index = _index  # type: ignore[method-assign]
_default_get_urls = admin.site.get_urls


def _get_urls() -> list[URLPattern | URLResolver]:
    return [
        path("health/", admin.site.admin_view(health_view), name="kody_health"),
        path("health.json", health_json_view, name="kody_health_json"),
        path("tables/", admin.site.admin_view(tables_view), name="kody_tables"),
        path("insights/", admin.site.admin_view(insights_view), name="kody_insights"),
        *_default_get_urls(),
    ]


admin.site.get_urls = _get_urls  # type: ignore[method-assign]
