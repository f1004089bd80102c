"""Admission at the door of the web process: at most as many requests inside as there are
database connections to serve them; the rest wait their turn cheaply, or are told to come back.

Design note. Django runs each sync request in a thread of its own, and a request
keeps its pooled database connection until it ends. Let a burst of a thousand calls in and a
thousand threads contend for twenty connections and one interpreter lock: each call gets
slower, most outlive the pool's timeout, and the process answers little but 503s. This
middleware is the outermost one and runs on the event loop, after Django has read the
request's body and before any thread is taken: a request enters once one of the
``KODY_DB_POOL_SIZE`` places is free, in arrival order, and one still outside after
``KODY_DB_POOL_TIMEOUT`` seconds is answered ``overloaded`` (503, ``Retry-After``). Waiting
costs a coroutine, and a slow client still sending its body holds no place. ``/healthz`` and
static files are never held back: they need no pooled connection, and a health probe must
answer while the process is busy. Under WSGI (the test client, ``runserver``) the server
bounds its own threads and the door stands open. ``/mcp`` is served in front of Django; its
database work runs on the event loop's bounded executor, so it needs no door of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from kody.outage import Overloaded

_EXEMPT_PREFIXES = ("/healthz", "/static/")


class AdmissionMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.places = settings.KODY_DB_POOL_SIZE
        self.wait_seconds = settings.KODY_DB_POOL_TIMEOUT
        self._door: asyncio.Semaphore | None = None
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self._enter(request)
        return self.get_response(request)

    async def _enter(self, request: HttpRequest) -> HttpResponse:
        get_response: Callable[[HttpRequest], Awaitable[HttpResponse]] = self.get_response
        if self.places <= 0 or request.path.startswith(_EXEMPT_PREFIXES):
            return await get_response(request)
        if self._door is None:  # made on the server's event loop, at its first request
            self._door = asyncio.Semaphore(self.places)
        door = self._door
        try:
            await asyncio.wait_for(door.acquire(), self.wait_seconds)
        except TimeoutError:
            return overloaded(request)
        try:
            return await get_response(request)
        finally:
            door.release()


def overloaded(request: HttpRequest) -> HttpResponse:
    error = Overloaded()
    accept = request.headers.get("Accept", "")
    if "text/html" in accept and "application/json" not in accept:
        body = (
            "<!doctype html><title>Briefly unavailable</title><h1>Briefly unavailable</h1>"
            f"<p>{error.message}</p><p>Error code: <code>{error.code}</code></p>"
        )
        response: HttpResponse = HttpResponse(body, status=error.status)
    else:
        response = JsonResponse({"error": error.as_dict()}, status=error.status)
    response["Retry-After"] = str(error.retry_after_seconds)
    return response
