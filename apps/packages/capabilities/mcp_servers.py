"""Remote MCP servers (domain ``mcpServers``): the person's own MCP servers that Kody connects
to, with their tools cached per server and callable through Kody."""

from __future__ import annotations

from typing import Any

from apps.packages.services import mcp_servers
from kody.capabilities import Context, capability

SERVER_ID = {"type": "string", "minLength": 1, "maxLength": 64}
ONE = {
    "type": "object",
    "properties": {"serverId": SERVER_ID},
    "required": ["serverId"],
    "additionalProperties": False,
}


@capability(
    name="mcpServerAdd",
    domain="mcpServers",
    mutates=True,
    title="Add a remote MCP server",
    description=(
        "Connect Kody to one of your own MCP servers (Streamable HTTP, an https URL on the "
        "public internet). Kody connects once, records the server and caches its tools; the "
        "server is saved even when it cannot be reached now (its status says why)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 64},
            "url": {"type": "string", "minLength": 1, "maxLength": 2048},
        },
        "required": ["name", "url"],
        "additionalProperties": False,
    },
)
def mcp_server_add(ctx: Context, name: str, url: str) -> Any:
    return {"server": mcp_servers.add(ctx.user_id, name, url)}


@capability(
    name="mcpServerList",
    domain="mcpServers",
    title="List remote MCP servers",
    description="Your remote MCP servers with their status and cached tool names.",
)
def mcp_server_list(ctx: Context) -> Any:
    return {"servers": mcp_servers.listing(ctx.user_id)}


@capability(
    name="mcpServerReconnect",
    domain="mcpServers",
    mutates=True,
    title="Reconnect a remote MCP server",
    description="Connect to the server again and record whether it answers.",
    input_schema=ONE,
)
def mcp_server_reconnect(ctx: Context, serverId: str) -> Any:  # noqa: N803
    return {"server": mcp_servers.reconnect(ctx.user_id, serverId)}


@capability(
    name="mcpServerRefresh",
    domain="mcpServers",
    mutates=True,
    title="Refresh a remote MCP server's tools",
    description="List the server's tools again and cache them; answers the tools with schemas.",
    input_schema=ONE,
)
def mcp_server_refresh(ctx: Context, serverId: str) -> Any:  # noqa: N803
    return mcp_servers.refresh(ctx.user_id, serverId)


@capability(
    name="mcpServerRemove",
    domain="mcpServers",
    mutates=True,
    title="Remove a remote MCP server",
    description="Forget a remote MCP server and its cached tools.",
    input_schema=ONE,
)
def mcp_server_remove(ctx: Context, serverId: str) -> Any:  # noqa: N803
    return mcp_servers.remove(ctx.user_id, serverId)


@capability(
    name="mcpServerSetEnabled",
    domain="mcpServers",
    mutates=True,
    title="Enable or disable a remote MCP server",
    description="A disabled server keeps its settings, but Kody refuses to call its tools.",
    input_schema={
        "type": "object",
        "properties": {"serverId": SERVER_ID, "enabled": {"type": "boolean"}},
        "required": ["serverId", "enabled"],
        "additionalProperties": False,
    },
)
def mcp_server_set_enabled(ctx: Context, serverId: str, enabled: bool) -> Any:  # noqa: N803
    return {"server": mcp_servers.set_enabled(ctx.user_id, serverId, enabled)}


@capability(
    name="mcpServerCallTool",
    domain="mcpServers",
    mutates=True,
    title="Call a remote MCP server's tool",
    description=(
        "Call one tool of an enabled remote MCP server through Kody. Answers the tool's "
        "result as MCP gives it: content blocks, structuredContent and isError."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "serverId": SERVER_ID,
            "tool": {"type": "string", "minLength": 1, "maxLength": 128},
            "arguments": {"type": "object"},
        },
        "required": ["serverId", "tool"],
        "additionalProperties": False,
    },
)
def mcp_server_call_tool(
    ctx: Context,
    serverId: str,  # noqa: N803
    tool: str,
    arguments: dict[str, Any] | None = None,
) -> Any:
    return mcp_servers.call_tool(ctx.user_id, serverId, tool, arguments)
