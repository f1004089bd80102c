"""``adminPlatformAccountCreate``: operators provision the platform accounts that own official
package scopes. A platform account is an ordinary verified account with ``account_type``
``platform``; it may take a name reserved against signups (never a system mail local), and
people act in its scope only through ``package_scope_grants``.
"""

from __future__ import annotations

from typing import Any

from apps.accounts.admin_user_capabilities import user_view
from apps.accounts.services import audit, identity
from kody.capabilities import Context, capability


@capability(
    name="adminPlatformAccountCreate",
    domain="admin",
    role="admin",
    mutates=True,
    title="Create a platform account (operator)",
    description=(
        "Create a verified platform account that owns an official package scope (its username "
        "may be one reserved against signups). The reply carries a one-time set-password link "
        "to hand to whoever runs it; grant people its scope with adminPackageScopeGrantCreate."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "minLength": 3, "maxLength": 320},
            "username": {"type": "string", "minLength": 1, "maxLength": 64},
        },
        "required": ["email", "username"],
        "additionalProperties": False,
    },
)
def admin_platform_account_create(ctx: Context, email: str, username: str) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPlatformAccountCreate")
    user = identity.provision(email=email, username=username, platform=True)
    return {"user": user_view(user), "setPasswordLink": identity.set_password_link(user)}
