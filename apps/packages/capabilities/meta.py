"""Meta capabilities: the person's MCP server instructions and what this caller may call."""

from __future__ import annotations

from typing import Any

from apps.packages.services import mcp_instructions
from kody.capabilities import Context, capability, visible_to

INSTRUCTIONS_OUTPUT = {
    "type": "object",
    "properties": {"instructions": {"type": "string"}},
    "required": ["instructions"],
}


@capability(
    name="metaGetMcpServerInstructions",
    domain="meta",
    title="Read your MCP server instructions",
    description="The instructions you keep for your agents (empty when none are set).",
    output_schema=INSTRUCTIONS_OUTPUT,
)
def meta_get_mcp_server_instructions(ctx: Context) -> dict[str, Any]:
    return {"instructions": mcp_instructions.get_instructions(ctx.user_id)}


@capability(
    name="metaSetMcpServerInstructions",
    domain="meta",
    mutates=True,
    title="Set your MCP server instructions",
    description="Replace the instructions your agents read about working with Kody for you; "
    f"at most {mcp_instructions.MAX_CHARS} characters; empty text clears them.",
    input_schema={
        "type": "object",
        "properties": {"instructions": {"type": "string", "maxLength": mcp_instructions.MAX_CHARS}},
        "required": ["instructions"],
        "additionalProperties": False,
    },
    output_schema=INSTRUCTIONS_OUTPUT,
)
def meta_set_mcp_server_instructions(ctx: Context, instructions: str) -> dict[str, Any]:
    return {"instructions": mcp_instructions.set_instructions(ctx.user_id, instructions)}


@capability(
    name="metaListCapabilities",
    domain="meta",
    title="List what you may call",
    description="The capabilities this caller's token may call, grouped by domain.",
    output_schema={
        "type": "object",
        "properties": {
            "domains": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "domain": {"type": "string"},
                        "capabilities": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string"},
                                    "title": {"type": "string"},
                                    "mutates": {"type": "boolean"},
                                },
                                "required": ["name", "title", "mutates"],
                            },
                        },
                    },
                    "required": ["domain", "capabilities"],
                },
            }
        },
        "required": ["domains"],
    },
)
def meta_list_capabilities(ctx: Context) -> dict[str, Any]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for cap in visible_to(ctx):
        grouped.setdefault(cap.domain, []).append(
            {"name": cap.name, "title": cap.title or cap.name, "mutates": cap.mutates}
        )
    return {
        "domains": [
            {"domain": domain, "capabilities": caps} for domain, caps in sorted(grouped.items())
        ]
    }
