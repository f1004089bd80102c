"""Calling a capability: the checks every surface shares, in one order.

Order: the capability exists (404) → the caller's role allows it (403) → the token's scopes
allow it (403) → the input is text Postgres can store (no NUL, no lone surrogate) and matches
the schema (422) → the handler runs; a mutation runs inside the ``KODY_ACCOUNT_POLICY``'s
``write_guard``, which refuses it once the account is being deleted (409) and otherwise holds
an account write lease, so a deletion waits for it and nothing lands after the drain. Admin
capabilities write an audit row for every attempt, allowed or not, with hashed identifiers
only; a crash is audited with reason ``error``.
Error details never echo more than a few hundred characters of what the caller sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kody.callers import Principal, Token, account_policy, audit_sink
from kody.capabilities.registry import Capability, all_capabilities, get
from kody.capabilities.secrecy import SECRET
from kody.capabilities.text import check_text, clipped
from kody.errors import Forbidden, InvalidInput, KodyError, NotFound

MAX_REPORTED_ERRORS = 10


class UnknownCapability(NotFound):
    code = "unknown_capability"
    message = "No such capability."


class InsufficientScope(Forbidden):
    code = "insufficient_scope"
    message = "This token does not grant that capability."


@dataclass(frozen=True)
class Context:
    """Who is calling and through which surface; handlers scope every read and write by ``user``."""

    # The accounts app's own user and token rows; the kernel relies only on these Protocols.
    user: Principal
    token: Token | None = None
    surface: str = "api"  # api | mcp | ui | cli
    ip: str | None = None

    @property
    def user_id(self) -> str:
        return self.user.stable_user_id

    @property
    def is_admin(self) -> bool:
        return bool(self.user.is_staff)

    @property
    def client_id(self) -> str | None:
        return self.token.principal_id if self.token is not None else None


def visible_to(ctx: Context) -> list[Capability]:
    return [cap for cap in all_capabilities() if _may_call(ctx, cap)]


def invoke(name: str, ctx: Context, arguments: Mapping[str, Any] | None = None) -> Any:
    cap = get(name)
    if cap is None:
        raise UnknownCapability(details={"name": name})
    try:
        result = _checked_call(cap, ctx, arguments)
    except KodyError as exc:
        _audit_admin(cap, ctx, "failure", reason=exc.code)
        raise
    except Exception:
        _audit_admin(cap, ctx, "failure", reason="error")
        raise
    _audit_admin(cap, ctx, "success")
    return result


def _checked_call(cap: Capability, ctx: Context, arguments: Mapping[str, Any] | None) -> Any:
    if cap.role == "admin" and not ctx.is_admin:
        raise Forbidden("This capability is for operators.", details={"name": cap.name})
    if ctx.token is not None and not ctx.token.allows(cap.scope):
        raise InsufficientScope(details={"name": cap.name, "scope": cap.scope})
    data = _validated(cap, arguments)
    if not cap.mutates:
        return cap.handler(ctx, **data)
    # Refused (409 account_deleting) once deletion has started; otherwise holds a write lease.
    with account_policy().write_guard(ctx.user, f"{ctx.surface}:{cap.name}"):
        return cap.handler(ctx, **data)


def _may_call(ctx: Context, cap: Capability) -> bool:
    if cap.role == "admin" and not ctx.is_admin:
        return False
    return ctx.token is None or ctx.token.allows(cap.scope)


def _validated(cap: Capability, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    data = {} if arguments is None else arguments
    if not isinstance(data, Mapping):
        raise InvalidInput("The input must be a JSON object.", details={"errors": []})
    check_text(data)
    errors = sorted(cap.validator.iter_errors(dict(data)), key=lambda e: list(e.absolute_path))
    if errors:
        raise InvalidInput(
            details={
                "errors": [
                    {"path": clipped(_pointer(e.absolute_path)), "message": _message(e)}
                    for e in errors[:MAX_REPORTED_ERRORS]
                ]
            }
        )
    return _integral(cap.input_schema, dict(data))


def _message(error: Any) -> str:
    """jsonschema quotes the offending input; for a secret-marked property only the rule is said."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if schema.get(SECRET):
        return clipped(f"Fails the schema's {error.validator!r} rule ({error.validator_value!r}).")
    if error.validator == "not":
        # "… should not be valid under …" would quote the whole input, secrets included.
        return clipped(
            str(schema.get("description") or "The input has a shape the schema rules out.")
        )
    return clipped(error.message)


def _integral(schema: Mapping[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema counts ``2.0`` as an integer; hand handlers a real ``int`` for it."""
    properties = schema.get("properties") or {}
    for name, value in data.items():
        declared = (properties.get(name) or {}).get("type")
        is_integer = declared == "integer" or (
            isinstance(declared, list) and "integer" in declared and "number" not in declared
        )
        if is_integer and isinstance(value, float) and value.is_integer():
            data[name] = int(value)
    return data


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path)


def _audit_admin(cap: Capability, ctx: Context, result: str, reason: str | None = None) -> None:
    if cap.role != "admin":
        return
    audit_sink()(
        category="admin",
        action=cap.name,
        result=result,
        email=ctx.user.email,
        ip=ctx.ip,
        client_id=ctx.client_id,
        path=f"{ctx.surface}:{cap.name}",
        reason=reason,
    )
