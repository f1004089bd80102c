"""Capabilities: named operations agents call through the API and MCP.

Declare one in ``apps/<app>/capabilities.py``::

    from kody.capabilities import Context, capability

    @capability(name="whoami", domain="account", description="...", rest=("GET", "whoami"))
    def whoami(ctx: Context) -> dict: ...
"""

from kody.capabilities.invoke import (
    Context,
    InsufficientScope,
    UnknownCapability,
    invoke,
    visible_to,
)
from kody.capabilities.registry import (
    NO_INPUT,
    Capability,
    RestAlias,
    all_capabilities,
    capability,
    get,
    register,
    unregister,
)

__all__ = [
    "NO_INPUT",
    "Capability",
    "Context",
    "InsufficientScope",
    "RestAlias",
    "UnknownCapability",
    "all_capabilities",
    "capability",
    "get",
    "invoke",
    "register",
    "unregister",
    "visible_to",
]
