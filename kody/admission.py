"""Admission at the door of the web process: at most as many requests inside as there are
database connections to serve them; the rest wait their turn cheaply, or are told to come back.

Design note (ADR 0048). Django runs each sync request in a thread of its own, and a request
keeps its pooled database connection until it ends. Let a burst of a thousand calls in and
a thousand threads contend for twenty connections and one interpreter lock: each call gets
slower, most outlive the pool's timeout, and the process answers little but 503s. Waiting
here instead costs a coroutine, not a thread: a request enters once one of the
``KODY_DB_POOL_SIZE`` places is free, in arrival order, and one still outside after
``KODY_DB_POOL_TIMEOUT`` seconds is answered ``overloaded`` (503, ``Retry-After``) without
touching Django. ``/healthz`` and static files are never held back: they need no connection
from the pool, and a health probe must answer while the process is busy.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kody.outage import Overloaded

Scope = dict[str, Any]
_EXEMPT_PREFIXES = ("/healthz", "/static/")


class Admission:
    def __init__(self, app: Any, places: int, wait_seconds: float) -> None:
        self.app = app
        self.places = places
        self.wait_seconds = wait_seconds
        self._door: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if (
            self.places <= 0
            or scope["type"] != "http"
            or scope.get("path", "").startswith(_EXEMPT_PREFIXES)
        ):
            await self.app(scope, receive, send)
            return
        if self._door is None:  # made on the server's own event loop, at its first request
            self._door = asyncio.Semaphore(self.places)
        door = self._door
        try:
            await asyncio.wait_for(door.acquire(), self.wait_seconds)
        except TimeoutError:
            await _overloaded(scope, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            door.release()


async def _overloaded(scope: Scope, send: Any) -> None:
    error = Overloaded()
    accept = dict(scope.get("headers") or []).get(b"accept", b"").decode("latin-1")
    if "text/html" in accept and "application/json" not in accept:
        body = (
            "<!doctype html><title>Briefly unavailable</title><h1>Briefly unavailable</h1>"
            f"<p>{error.message}</p><p>Error code: <code>{error.code}</code></p>"
        ).encode()
        content_type = b"text/html; charset=utf-8"
    else:
        body = json.dumps({"error": error.as_dict()}).encode()
        content_type = b"application/json"
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(error.retry_after_seconds).encode()),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
