"""Operator capabilities over reserved usernames: list, add, remove (the admin page's changes,
made the same way: ``apps.accounts.admin_reserved``)."""

from __future__ import annotations

from typing import Any

from apps.accounts import admin_reserved as reserved
from apps.accounts import usernames
from apps.accounts.services import audit
from kody.capabilities import Context, capability

NAMES = {"type": "array", "items": {"type": "string"}}
OVERRIDE = {
    "type": "object",
    "properties": {
        "added": NAMES,
        "removed": NAMES,
        "builtIn": NAMES,
        "updatedAt": {"type": ["string", "null"]},
        "updatedBy": {"type": ["string", "null"]},
    },
    "required": ["added", "removed", "builtIn", "updatedAt", "updatedBy"],
}
CHANGED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "reserved": {"type": "boolean"},
        "override": OVERRIDE,
    },
    "required": ["name", "reserved", "override"],
}


def _input(action: reserved.Action) -> dict[str, Any]:
    name = {
        "type": "string",
        "minLength": reserved.MIN_LENGTH[action],
        "maxLength": reserved.MAX_LENGTH,
        "pattern": reserved.TOKEN_PATTERN,
        "description": "Letters and digits joined by single hyphens or underscores; "
        "matched case-insensitively.",
    }
    return {
        "type": "object",
        "properties": {"name": name},
        "required": ["name"],
        "additionalProperties": False,
    }


@capability(
    name="adminReservedUsernameList",
    domain="admin",
    role="admin",
    title="Reserved usernames (operator)",
    description=(
        "The operator override of reserved usernames (added, released) and the built-in list; "
        "the effective set is (built-in + added) - released."
    ),
    output_schema=OVERRIDE,
)
def admin_reserved_username_list(ctx: Context) -> dict[str, Any]:
    return reserved.view(usernames.read_override())


def _change(ctx: Context, action: reserved.Action, name: str) -> dict[str, Any]:
    token = reserved.clean_token(name, action)
    audit.record_intent(ctx, reserved.AUDIT_ACTIONS[action], token)
    override = reserved.change(action, token, by_stable_user_id=str(ctx.user_id))
    return {
        "name": token,
        "reserved": usernames.is_reserved(token),
        "override": reserved.view(override),
    }


@capability(
    name="adminReservedUsernameAdd",
    domain="admin",
    role="admin",
    mutates=True,
    title="Reserve a username (operator)",
    description=(
        "Reserve a name for new accounts: exactly, and as a root no new username may contain."
    ),
    input_schema=_input("add"),
    output_schema=CHANGED,
)
def admin_reserved_username_add(ctx: Context, name: str) -> dict[str, Any]:
    return _change(ctx, "add", name)


@capability(
    name="adminReservedUsernameRemove",
    domain="admin",
    role="admin",
    mutates=True,
    title="Release a reserved username (operator)",
    description=(
        "Release an added or built-in reserved name. Protected system names (mail locals, "
        "kody names) stay reserved: 409 protected_username."
    ),
    input_schema=_input("remove"),
    output_schema=CHANGED,
)
def admin_reserved_username_remove(ctx: Context, name: str) -> dict[str, Any]:
    return _change(ctx, "remove", name)
