"""The one capability registry that the DRF API and the MCP endpoint both serve.

Apps declare capabilities in ``apps/<app>/capabilities.py`` with the ``@capability`` decorator;
``kody.discovery.autodiscover()`` imports those modules once, at ``KodyConfig.ready()``. A name
is registered once: a second registration of the same name is a programming error and fails at
start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

Role = Literal["user", "admin"]
Handler = Callable[..., Any]

NAME_RE = re.compile(r"^[a-z][a-zA-Z0-9]{0,63}$")
ALIAS_RE = re.compile(r"^[a-z][a-z0-9-]*(/[a-z][a-z0-9-]*)*$")
NO_INPUT: Mapping[str, Any] = MappingProxyType(
    {"type": "object", "properties": {}, "additionalProperties": False}
)


@dataclass(frozen=True)
class RestAlias:
    """An extra REST route for a capability, e.g. ``GET /api/v1/whoami``."""

    method: Literal["GET", "POST"]
    path: str


@dataclass(frozen=True)
class Capability:
    name: str
    domain: str
    description: str
    handler: Handler
    input_schema: Mapping[str, Any] = field(default_factory=lambda: NO_INPUT)
    output_schema: Mapping[str, Any] | None = None
    role: Role = "user"
    # Mutating capabilities are refused once the account is being deleted.
    mutates: bool = False
    title: str = ""
    rest: RestAlias | None = None
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_definition(self)
        object.__setattr__(self, "validator", Draft202012Validator(dict(self.input_schema)))

    @property
    def scope(self) -> str:
        """The token scope that grants this capability (OAuth tokens may hold a subset)."""
        return self.domain


_registry: dict[str, Capability] = {}


def register(cap: Capability) -> Capability:
    if cap.name in _registry:
        raise ImproperlyConfigured(f"capability {cap.name!r} is registered twice")
    if cap.rest is not None:
        clash = [c.name for c in _registry.values() if c.rest == cap.rest]
        if clash:
            raise ImproperlyConfigured(f"{cap.rest} is already the route of {clash[0]!r}")
    _registry[cap.name] = cap
    return cap


def capability(
    *,
    name: str,
    domain: str,
    description: str,
    input_schema: Mapping[str, Any] = NO_INPUT,
    output_schema: Mapping[str, Any] | None = None,
    role: Role = "user",
    mutates: bool = False,
    title: str = "",
    rest: tuple[Literal["GET", "POST"], str] | None = None,
) -> Callable[[Handler], Handler]:
    """Register the decorated ``handler(ctx, **input)``; it stays callable as a plain function."""

    def decorate(handler: Handler) -> Handler:
        register(
            Capability(
                name=name,
                domain=domain,
                description=description,
                handler=handler,
                input_schema=input_schema,
                output_schema=output_schema,
                role=role,
                mutates=mutates,
                title=title,
                rest=RestAlias(*rest) if rest else None,
            )
        )
        return handler

    return decorate


def get(name: str) -> Capability | None:
    return _registry.get(name)


def all_capabilities() -> list[Capability]:
    return sorted(_registry.values(), key=lambda cap: (cap.domain, cap.name))


def unregister(name: str) -> None:
    """For tests that register throwaway capabilities."""
    _registry.pop(name, None)


def _check_definition(cap: Capability) -> None:
    if not NAME_RE.match(cap.name):
        raise ImproperlyConfigured(f"capability name {cap.name!r} must be camelCase")
    if cap.role not in ("user", "admin"):
        raise ImproperlyConfigured(f"capability {cap.name!r} has unknown role {cap.role!r}")
    if cap.input_schema.get("type") != "object":
        raise ImproperlyConfigured(f"capability {cap.name!r} input schema must be an object")
    if cap.rest is not None and not ALIAS_RE.match(cap.rest.path):
        raise ImproperlyConfigured(f"capability {cap.name!r} has a bad REST path {cap.rest.path!r}")
    for schema in (cap.input_schema, cap.output_schema):
        if schema is None:
            continue
        try:
            Draft202012Validator.check_schema(dict(schema))
        except SchemaError as exc:
            raise ImproperlyConfigured(f"capability {cap.name!r}: {exc.message}") from exc
