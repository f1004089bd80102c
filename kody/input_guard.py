"""One check for the text every request carries: NUL and lone surrogates answer 422.

Postgres cannot store U+0000 and a lone surrogate cannot be encoded at all, so either one
reaching a query used to surface as a 500. The capabilities refuse them in their arguments
(``kody/capabilities/text.py``); this middleware runs that same check, before any view, on what
every other surface reads from the request: the URL path, the query string, the headers,
the cookies and, for pages, the form fields. Endpoints exempt from CSRF — the API, the
webhooks, the inbound mail door — are not forms: they read their own body (JSON, raw MIME) and
answer for it, and reading it here as a form would consume it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from kody.capabilities.text import check_text
from kody.errors import InvalidInput

_JSON_PREFIXES = ("/api/", "/inbound/", "/mcp")


class RefuseUnstorableTextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        headers = {k: v for k, v in request.META.items() if k.startswith("HTTP_")}
        # Cookies too: a quoted cookie value can carry an escaped NUL the raw header does not.
        refused = _refused(
            request,
            {
                "path": request.path_info,
                "query": _fields(request.GET),
                "headers": headers,
                "cookies": request.COOKIES,
            },
        )
        return refused or self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.method != "POST" or getattr(view, "csrf_exempt", False):
            return None
        return _refused(request, {"form": _fields(request.POST)})


def _fields(query: Any) -> dict[str, list[str]]:
    return dict(query.lists())


def _refused(request: HttpRequest, parts: dict[str, Any]) -> HttpResponse | None:
    try:
        check_text(parts)
    except InvalidInput as exc:
        return _answer(request, exc)
    return None


def _answer(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    path = request.path_info
    wants_json = "application/json" in request.META.get("HTTP_ACCEPT", "")
    if path.startswith(_JSON_PREFIXES) or path.endswith(".json") or wants_json:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    # Rendered without the request: its session and user are what the refused text could reach.
    return HttpResponse(render_to_string("bad_request.html", {"error": exc}), status=exc.status)
