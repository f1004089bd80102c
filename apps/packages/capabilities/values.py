"""Value capabilities: small named values kept per user, app or session."""

from __future__ import annotations

from typing import Any

from apps.packages.services import values
from kody.capabilities import Context, capability

NAME = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[A-Za-z0-9_.:-]+$"}
WHERE = {
    "scope": {"type": "string", "enum": ["user", "app", "session"]},
    "bindingKey": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "description": "The app id (scope app) or session id (scope session).",
    },
}


# Only an app or session bucket has a binding key (scope defaults to user); the schema says so.
BINDING_RULE = {
    "if": {"properties": {"scope": {"const": "user"}}},
    "then": {
        "not": {"required": ["bindingKey"]},
        "description": "A user-scoped value takes no bindingKey.",
    },
    "else": {"required": ["bindingKey"]},
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**properties, **WHERE},
        "required": required,
        "additionalProperties": False,
        **BINDING_RULE,
    }


@capability(
    name="valueSet",
    domain="values",
    mutates=True,
    title="Save a value",
    description="Save a named value (not a secret: values are stored and shown in plain text).",
    input_schema=_schema(
        {
            "name": NAME,
            "value": {"type": "string", "maxLength": 65536},
            "description": {"type": "string", "maxLength": 1000},
        },
        ["name", "value"],
    ),
)
def value_set(
    ctx: Context,
    name: str,
    value: str,
    description: str = "",
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    saved = values.set_value(
        ctx.user_id,
        name=name,
        value=value,
        description=description,
        scope=scope,
        binding_key=bindingKey,
    )
    return {"value": saved}


@capability(
    name="valueGet",
    domain="values",
    title="Read a value",
    description="One named value.",
    input_schema=_schema({"name": NAME}, ["name"]),
)
def value_get(
    ctx: Context,
    name: str,
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    return {"value": values.get_value(ctx.user_id, name=name, scope=scope, binding_key=bindingKey)}


@capability(
    name="valueList",
    domain="values",
    title="List values",
    description="Every value in one scope (default: the user's own).",
    input_schema=_schema({}, []),
)
def value_list(
    ctx: Context,
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    return {"values": values.list_values(ctx.user_id, scope=scope, binding_key=bindingKey)}


@capability(
    name="valueDelete",
    domain="values",
    mutates=True,
    title="Delete a value",
    description="Delete one named value.",
    input_schema=_schema({"name": NAME}, ["name"]),
)
def value_delete(
    ctx: Context,
    name: str,
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    values.delete_value(ctx.user_id, name=name, scope=scope, binding_key=bindingKey)
    return {"deleted": True, "name": name}
