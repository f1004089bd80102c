"""Running agent code: ``execute`` and the bridge code calls back through.

The sandbox (``kody.sandbox.pool``) runs the code; this module decides what the code may
reach. ``kody.<name>(args)`` is ``kody.capabilities.invoke`` with the caller's own context —
same user, token scopes, metering and write guard — except that admin capabilities and
``execute`` itself are unknown from code. ``fetch`` goes through ``kody.sandbox.netfetch``
after the ``{{secret:name}}`` placeholders are filled, each only for a host in that secret's
``allowed_hosts``; every fetch is charged to ``outbound_fetches_per_day`` first. The filled
values are scrubbed from what comes back and never appear in an error. A text body is filled
like the URL and headers; a binary body (base64 on the channel) is sent as it is. Static
``kody:@`` imports in ad hoc code are resolved by ``adhoc_imports`` before the code runs.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from apps.entitlements import services as entitlements
from apps.entitlements.plans import Plan
from apps.packages.services import adhoc_imports
from apps.packages.services import secrets as secrets_service
from kody.capabilities import Context, UnknownCapability, get, invoke
from kody.errors import Forbidden, KodyError
from kody.fetch import FetchRefused as NetRefused
from kody.sandbox import netfetch
from kody.sandbox.pool import Limits, Outcome, pool

log = logging.getLogger(__name__)
PLACEHOLDER = re.compile(r"\{\{secret:([A-Za-z0-9_.:-]{1,255})\}\}")
NOT_FROM_CODE = frozenset({"execute"})
MAX_CODE_CHARS = 200_000
FETCH_MAX_BYTES = 5_000_000
FETCH_TIMEOUT_SECONDS = 10.0
FETCH_MAX_BODY_BYTES = Limits().max_request_bytes  # a request body, text or bytes

# Per-plan defaults (documented in docs/architecture.md): wall seconds, V8 heap MB.
PLAN_LIMITS: dict[str, tuple[float, int]] = {
    Plan.FREE: (5.0, 128),
    Plan.STANDARD: (15.0, 256),
    Plan.PRO: (30.0, 256),
    Plan.MAX: (60.0, 512),
}


class FetchRefused(KodyError):
    code = "fetch_refused"
    status = 422
    message = "That fetch is not allowed."


def limits_for(user_id: str) -> Limits:
    wall, memory = PLAN_LIMITS.get(str(entitlements.cached_plan(user_id)), PLAN_LIMITS[Plan.FREE])
    override = getattr(settings, "KODY_EXECUTE_WALL_SECONDS", None)
    return Limits(wall_seconds=override or wall, memory_mb=memory)


@dataclass
class Bridge:
    """Answers one run's requests as ``ctx``; ``package_id`` is set when a package runs."""

    ctx: Context
    run_id: str
    package_id: str | None = None

    def __call__(self, op: str, message: dict[str, Any]) -> Any:
        if op == "call":
            return self.call(message.get("name"), message.get("args"))
        return self.fetch(message)

    def call(self, name: Any, args: Any) -> Any:
        cap = get(name) if isinstance(name, str) else None
        if cap is None or cap.role == "admin" or cap.name in NOT_FROM_CODE:
            raise UnknownCapability(details={"name": str(name)[:100]})
        value = invoke(cap.name, self.ctx, args)
        return json.loads(json.dumps(value, cls=DjangoJSONEncoder))

    def fetch(self, message: dict[str, Any]) -> dict[str, Any]:
        url, method = message.get("url"), message.get("method") or "GET"
        headers, body = message.get("headers") or {}, message.get("body")
        if not isinstance(url, str) or not isinstance(headers, dict):
            raise FetchRefused("fetch needs a URL string and plain headers.")
        host = (urlsplit(url).hostname or "").lower()
        filled: list[str] = []
        if message.get("bodyTooLarge"):
            raise FetchRefused(
                f"A fetch body may be at most {FETCH_MAX_BODY_BYTES} bytes.",
                details={"maxBytes": FETCH_MAX_BODY_BYTES},
            )
        # Placeholders are filled in the URL, headers and a text body; bytes go as they are.
        raw = _binary_body(message.get("bodyBase64"))
        request = netfetch.Request(
            method=str(method),
            url=self._fill(url, host, filled),
            headers={str(k): self._fill(str(v), host, filled) for k, v in headers.items()},
            body=self._fill(body, host, filled).encode() if isinstance(body, str) else raw,
            secret_headers=frozenset(
                k.lower() for k, v in headers.items() if PLACEHOLDER.search(str(v))
            ),
            secret_host=host,
        )
        entitlements.consume(
            self.ctx.user_id,
            "outbound_fetches_per_day",
            key=f"fetch:{self.run_id}:{message.get('id')}",
        )
        try:
            response = netfetch.perform(
                request, max_bytes=FETCH_MAX_BYTES, timeout=FETCH_TIMEOUT_SECONDS, **_resolver()
            )
        except NetRefused as exc:
            raise FetchRefused(_scrub(str(exc), filled), details={"host": host}) from None
        return {
            "status": response.status,
            "headers": {k: _scrub(v, filled) for k, v in response.headers.items()},
            "body": base64.b64encode(_scrub_bytes(response.body, filled)).decode(),
        }

    def _fill(self, text: str, host: str, filled: list[str]) -> str:
        def one(match: re.Match[str]) -> str:
            try:
                value = secrets_service.resolve_for_use(
                    self.ctx.user_id, match.group(1), package_id=self.package_id, host=host
                )
            except KodyError as exc:
                raise FetchRefused(
                    f"The secret {match.group(1)!r} may not be sent to {host or 'that URL'}.",
                    details={"secret": match.group(1), "host": host, "reason": exc.code},
                ) from None
            filled.append(value)
            return value

        return PLACEHOLDER.sub(one, text)


def _binary_body(encoded: Any) -> bytes | None:
    if encoded is None:
        return None
    if not isinstance(encoded, str) or len(encoded) > FETCH_MAX_BODY_BYTES * 4 // 3 + 4:
        raise FetchRefused(
            f"A fetch body may be at most {FETCH_MAX_BODY_BYTES} bytes.",
            details={"maxBytes": FETCH_MAX_BODY_BYTES},
        )
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError:
        raise FetchRefused("The fetch body did not arrive whole.") from None


def _resolver() -> dict[str, Any]:
    # Tests that need a local server set this; the refusal tests run without it.
    allow = getattr(settings, "KODY_EXECUTE_FETCH_ALLOW", None)
    if not allow:
        return {}
    from kody.fetch import resolve_checked

    def resolve(host: str, port: int) -> list[str]:
        if host in allow:
            return ["127.0.0.1"]
        return resolve_checked(host, port)

    return {"resolve": resolve}


def _scrub(text: str, filled: list[str]) -> str:
    for value in filled:
        if value:
            text = text.replace(value, "[secret]")
    return text


def _scrub_bytes(data: bytes, filled: list[str]) -> bytes:
    for value in filled:
        if value:
            data = data.replace(value.encode(), b"[secret]")
    return data


def execute(ctx: Context, code: str, params: Any = None) -> dict[str, Any]:
    """Run ad hoc code as ``ctx``: charged once, bound to storage ``exec:{uuid}``."""
    if len(code) > MAX_CODE_CHARS:
        raise Forbidden("The code is too long.", details={"maxChars": MAX_CODE_CHARS})
    # Static kody:@ imports resolve in the caller's account to the current published bundles.
    code, _imports = adhoc_imports.resolve(ctx.user_id, code)
    run_id = str(uuid.uuid4())
    entitlements.consume(ctx.user_id, "execute_calls_per_day", key=f"execute:{run_id}")
    outcome = run_code(ctx, code, params, run_id=run_id, storage_id=f"exec:{run_id}")
    return {"result": outcome.result, "logs": outcome.logs, "durationMs": outcome.duration_ms}


def run_code(
    ctx: Context,
    code: str,
    params: Any,
    *,
    run_id: str,
    storage_id: str,
    package_id: str | None = None,
    module: bool = False,
) -> Outcome:
    bridge = Bridge(ctx=ctx, run_id=run_id, package_id=package_id)
    return pool().run(
        code,
        params,
        bridge=bridge,
        limits=limits_for(ctx.user_id),
        storage_id=storage_id,
        module=module,
    )
