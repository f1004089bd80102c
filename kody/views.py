import logging

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    mcp_url = settings.SITE_URL.rstrip("/") + "/mcp"
    return render(request, "home.html", {"mcp_url": mcp_url})


log = logging.getLogger("kody.health")


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except DatabaseError as exc:
        log.warning("healthz: database unavailable (%s)", type(exc).__name__)
        return False


def _broker_ok() -> bool:
    from kody import health

    try:
        return bool(health.broker_client().ping())
    except Exception as exc:
        log.warning("healthz: broker unavailable (%s)", type(exc).__name__)
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: 200 when the database and the broker both answer, else
    503 naming which one is down (no detail beyond that)."""
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    ok = all(checks.values())
    body = {"status": "ok" if ok else "unavailable"}
    body.update({name: "ok" if up else "unavailable" for name, up in checks.items()})
    return JsonResponse(body, status=200 if ok else 503)
