"""The status of the person's remote connectors, for agents: which are registered, enabled,
attached to their sessions, connected now, and what tools each offered at its last hello."""

from __future__ import annotations

from typing import Any

from apps.packages.services import remote_connectors
from kody.capabilities import Context, capability


@capability(
    name="metaListRemoteConnectorStatus",
    domain="meta",
    title="List remote connector status",
    description=(
        "Your remote connectors (programs you run that connect out to Kody, e.g. at home): "
        "whether each is enabled, attached, connected now, last seen, and its tools. Register "
        "or change them at /account/remote-connectors."
    ),
)
def meta_list_remote_connector_status(ctx: Context) -> Any:
    return {"connectors": remote_connectors.listing(ctx.user_id)}


@capability(
    name="remoteConnectorCallTool",
    domain="meta",
    mutates=True,
    title="Call a remote connector's tool",
    description=(
        "Call one tool of your connected, attached remote connector (see "
        "metaListRemoteConnectorStatus for names and tools). Answers the tool's result as MCP "
        "gives it: content blocks, structuredContent and isError."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "instanceId": {"type": "string", "minLength": 1, "maxLength": 64},
            "tool": {"type": "string", "minLength": 1, "maxLength": 128},
            "arguments": {"type": "object"},
        },
        "required": ["instanceId", "tool"],
        "additionalProperties": False,
    },
)
def remote_connector_call_tool(
    ctx: Context,
    instanceId: str,  # noqa: N803
    tool: str,
    arguments: dict[str, Any] | None = None,
) -> Any:
    return remote_connectors.call_tool(ctx.user_id, instanceId.strip().lower(), tool, arguments)
