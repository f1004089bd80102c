"""The builtin ``search``: find the capability for a task (and the user's related memories,
jobs and saved packages)."""

from __future__ import annotations

from typing import Any

from apps.packages.services import search
from kody.capabilities import Context, capability


@capability(
    name="search",
    domain="meta",
    title="Search capabilities and memories",
    description=(
        "Rank the capabilities you can call (with their input schemas) and the user's "
        "memories, jobs and saved packages for a natural-language query. Optionally limit to "
        "one capability domain."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 2000},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "domain": {"type": "string", "minLength": 1, "maxLength": 64},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)
def search_capability(
    ctx: Context, query: str, limit: int = 10, domain: str | None = None
) -> dict[str, Any]:
    return {"results": search.search(ctx, query, limit=limit, domain=domain)}
