import logging

import psycopg
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    mcp_url = settings.SITE_URL.rstrip("/") + "/mcp"
    return render(request, "home.html", {"mcp_url": mcp_url})


log = logging.getLogger("kody.health")


# A health check answers quickly or says the dependency is down; a load balancer gives up on
# a probe after a few seconds.
_CONNECT_TIMEOUT_SECONDS = 2


def _database_ok(alias: str) -> bool:
    """A fresh connection, not one from the pool: a full pool means busy, not down, and a
    pooled connection can outlive the server it was opened on."""
    params = connections[alias].get_connection_params()
    params.setdefault("connect_timeout", _CONNECT_TIMEOUT_SECONDS)
    try:
        with psycopg.connect(**params, autocommit=True) as raw:
            raw.execute("SELECT 1")
        return True
    except psycopg.Error as exc:
        log.warning("healthz: database %s unavailable (%s)", alias, type(exc).__name__)
        return False


def _broker_ok() -> bool:
    from kody import health

    try:
        return bool(health.broker_client().ping())
    except Exception as exc:
        log.warning("healthz: broker unavailable (%s)", type(exc).__name__)
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: 200 when the app database, the audit database and the
    broker all answer, else 503 naming which one is down (no detail beyond that)."""
    checks = {
        "database": _database_ok("default"),
        "audit_database": _database_ok("audit"),
        "broker": _broker_ok(),
    }
    ok = all(checks.values())
    body = {"status": "ok" if ok else "unavailable"}
    body.update({name: "ok" if up else "unavailable" for name, up in checks.items()})
    return JsonResponse(body, status=200 if ok else 503)
