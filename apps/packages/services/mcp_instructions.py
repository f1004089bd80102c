"""A person's own MCP server instructions (``mcp_user_server_instructions``): text their agents
read about how to work with Kody for them. One row per person, bounded."""

from __future__ import annotations

from apps.packages.models import McpUserServerInstructions

MAX_CHARS = 8000


def get_instructions(user_id: str) -> str:
    row = McpUserServerInstructions.objects.filter(user_id=user_id).first()
    return row.instructions if row is not None else ""


def set_instructions(user_id: str, instructions: str) -> str:
    """Replace the person's instructions; empty text removes the row."""
    text = instructions.strip()
    if not text:
        McpUserServerInstructions.objects.filter(user_id=user_id).delete()
        return ""
    McpUserServerInstructions.objects.update_or_create(
        user_id=user_id, defaults={"instructions": text}
    )
    return text
