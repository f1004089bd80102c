"""Routes under ``/api/v1/``: built from the capability registry when the URLconf loads."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from kody.api import views
from kody.capabilities import all_capabilities

RESERVED = {"capabilities", "schema", "docs", "redoc"}


def capability_patterns() -> list[URLPattern]:
    patterns = []
    for cap in all_capabilities():
        patterns.append(path(f"capabilities/{cap.name}", views.call_view(cap)))
        if cap.rest is not None:
            if cap.rest.path.split("/")[0] in RESERVED:
                raise ImproperlyConfigured(f"{cap.name}: REST path {cap.rest.path!r} is reserved")
            patterns.append(path(cap.rest.path, views.alias_view(cap), name=f"api-{cap.name}"))
    return patterns


urlpatterns = [
    path("", views.IndexView.as_view(), name="api-index"),
    path("capabilities", views.CapabilityListView.as_view(), name="api-capabilities"),
    *capability_patterns(),
    path("capabilities/<str:name>", views.CapabilityCallView.as_view(), name="api-capability-call"),
    path("schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
]
