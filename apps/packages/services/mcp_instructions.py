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


POPULAR_PACKAGES = 5


def initialize_text(user_id: str) -> str:
    """What ``initialize`` adds for this person (``KODY_MCP_INSTRUCTIONS``): their own
    instructions, then the packages their agents use in the most conversations."""
    from django.db.models import Count

    from apps.packages.models import AgentPackageConversationUse, SavedPackage

    parts = []
    own = get_instructions(user_id)
    if own:
        parts.append("The person's instructions for you:\n" + own)
    popular = list(
        AgentPackageConversationUse.objects.filter(user_id=user_id)
        .values("package_id")
        .annotate(conversations=Count("conversation_id"))
        .order_by("-conversations", "package_id")
        .values_list("package_id", flat=True)[:POPULAR_PACKAGES]
    )
    if popular:
        names = dict(
            SavedPackage.objects.filter(user_id=user_id, id__in=popular).values_list("id", "name")
        )
        shown = [names.get(package_id, package_id) for package_id in popular]
        parts.append("Packages this person's agents use most: " + ", ".join(shown) + ".")
    return "\n\n".join(parts)
