"""Outages a page cannot fix: a 503 with ``Retry-After`` instead of a 500, on every page.

The API and MCP map ``KodyError`` themselves; this covers the server-rendered pages (account
UI, admin), where a view that reaches an unavailable actor would otherwise crash.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from kody.errors import KodyError


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, KodyError) or exc.status != 503:
            return None
        if request.path.endswith(".json") or "application/json" in request.headers.get(
            "Accept", ""
        ):
            response: HttpResponse = JsonResponse({"error": exc.as_dict()}, status=503)
        else:
            body = render_to_string("unavailable.html", {"error": exc}, request=request)
            response = HttpResponse(body, status=503)
        retry_after = getattr(exc, "retry_after_seconds", None)
        if retry_after:
            response["Retry-After"] = str(retry_after)
        return response
