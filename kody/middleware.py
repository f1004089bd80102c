"""Outages a page cannot fix: a 503 with ``Retry-After`` instead of a 500, on every page.

The API and MCP map ``KodyError`` themselves; this covers the server-rendered pages (account
UI, admin) and the webhooks, where a view that reaches an unavailable actor, database or
broker would otherwise crash. It is the outermost middleware: an outage can also surface in
another middleware (the session or the account gate load rows before any view runs), and
Django turns those exceptions into a 500 response on the spot. The
``got_request_exception`` signal still sees each one first, so the request remembers the
outage it stood for and the 500 is replaced here on its way out (kody.outage).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from kody.errors import KodyError
from kody.outage import ServiceUnavailable, unavailable

log = logging.getLogger("kody.outage")
_OUTAGE_ATTR = "_kody_outage"
# Paths whose clients are programs: they get the JSON error body, never a page.
_JSON_PREFIXES = ("/api/", "/inbound/", "/healthz")


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        outage = getattr(request, _OUTAGE_ATTR, None)
        if response.status_code == 500 and outage is not None:
            return unavailable_response(request, outage)
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, KodyError) and exc.status == 503:
            return unavailable_response(request, exc)
        outage = unavailable(exc)
        if outage is None:
            return None
        log.warning("%s refused: %s (%s)", request.path, outage.code, type(exc).__name__)
        return unavailable_response(request, outage)


def _remember_outage(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    exc = sys.exc_info()[1]
    if request is None or exc is None:
        return
    outage = unavailable(exc)
    if outage is not None:
        log.warning("%s refused: %s (%s)", request.path, outage.code, type(exc).__name__)
        setattr(request, _OUTAGE_ATTR, outage)


got_request_exception.connect(_remember_outage, dispatch_uid="kody.middleware.outage")


def _wants_json(request: HttpRequest) -> bool:
    return (
        request.path.endswith(".json")
        or request.path.startswith(_JSON_PREFIXES)
        or "application/json" in request.headers.get("Accept", "")
    )


def unavailable_response(request: HttpRequest, exc: KodyError) -> HttpResponse:
    if _wants_json(request):
        response: HttpResponse = JsonResponse({"error": exc.as_dict()}, status=503)
    elif isinstance(exc, ServiceUnavailable):
        # Rendered without the request's context processors: they read the session and the
        # signed-in user, which is what just failed.
        body = render_to_string("unavailable.html", {"error": exc, "request": request})
        response = HttpResponse(body, status=503)
    else:
        body = render_to_string("unavailable.html", {"error": exc}, request=request)
        response = HttpResponse(body, status=503)
    retry_after = getattr(exc, "retry_after_seconds", None)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response
