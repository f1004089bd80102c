"""Memory capabilities (domain ``meta``): verify first, then upsert or delete."""

from __future__ import annotations

from typing import Any

from apps.packages.services import memories
from kody.capabilities import Context, capability

MEMORY_ID = {"type": "string", "minLength": 1, "maxLength": 64}
CANDIDATE_PROPERTIES = {
    "memoryId": {**MEMORY_ID, "description": "Update this memory instead of creating one."},
    "subject": {"type": "string", "minLength": 1, "maxLength": 300},
    "summary": {"type": "string", "minLength": 1, "maxLength": 2000},
    "details": {"type": "string", "maxLength": 20000},
    "category": {"type": "string", "minLength": 1, "maxLength": 64},
    "tags": {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": 64},
        "maxItems": 20,
    },
    "dedupeKey": {"type": "string", "minLength": 1, "maxLength": 255},
}
CANDIDATE = {
    "type": "object",
    "properties": CANDIDATE_PROPERTIES,
    "required": ["subject", "summary"],
    "additionalProperties": False,
}
BY_ID = {
    "type": "object",
    "properties": {"id": MEMORY_ID},
    "required": ["id"],
    "additionalProperties": False,
}


def _candidate(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "subject": args["subject"],
        "summary": args["summary"],
        "details": args.get("details", ""),
        "category": args.get("category"),
        "tags": args.get("tags", ()),
        "dedupe_key": args.get("dedupeKey"),
        "memory_id": args.get("memoryId"),
    }


@capability(
    name="memoryVerify",
    domain="meta",
    title="Check a memory before writing it",
    description=(
        "Before memoryUpsert or memoryDelete: the memories that already exist near a candidate "
        "(same dedupeKey or similar content), so you can update, delete, or skip. Reads only."
    ),
    input_schema=CANDIDATE,
)
def memory_verify(ctx: Context, **args: Any) -> dict[str, Any]:
    return memories.verify(ctx.user_id, **_candidate(args))


@capability(
    name="memoryUpsert",
    domain="meta",
    mutates=True,
    title="Save a long-term memory",
    description=(
        "Create a durable memory about the user, or update one: by memoryId, else the active "
        "memory with the same dedupeKey. Run memoryVerify first."
    ),
    input_schema=CANDIDATE,
)
def memory_upsert(ctx: Context, **args: Any) -> dict[str, Any]:
    return {"memory": memories.to_json(memories.upsert(ctx.user_id, **_candidate(args)))}


@capability(
    name="memoryGet",
    domain="meta",
    title="Read one memory",
    description="One of the user's memories by id.",
    input_schema=BY_ID,
)
def memory_get(ctx: Context, id: str) -> dict[str, Any]:  # noqa: A002
    return {"memory": memories.to_json(memories.get(ctx.user_id, id))}


@capability(
    name="memorySearch",
    domain="meta",
    title="Search memories",
    description=(
        "The user's active memories that best match a query, semantic and keyword together, "
        "best first. With conversationId, memories already surfaced in that conversation in "
        "the last day are left out."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 2000},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "category": {"type": "string", "minLength": 1, "maxLength": 64},
            "conversationId": {"type": "string", "minLength": 1, "maxLength": 255},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)
def memory_search(
    ctx: Context,
    query: str,
    limit: int = 10,
    category: str | None = None,
    conversationId: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    hits = memories.search(
        ctx.user_id, query, limit=limit, category=category, conversation_id=conversationId
    )
    return {
        "results": [
            {
                "id": h.memory.id,
                "subject": h.memory.subject,
                "summary": h.memory.summary,
                "category": h.memory.category,
                "tags": list(h.memory.tags_json),
                "score": round(h.score, 4),
                "updatedAt": h.memory.updated_at.isoformat(),
            }
            for h in hits
        ]
    }


@capability(
    name="memoryDelete",
    domain="meta",
    mutates=True,
    title="Delete a memory",
    description=(
        "Delete one of the user's memories (and its search vector). Run memoryVerify first."
    ),
    input_schema=BY_ID,
)
def memory_delete(ctx: Context, id: str) -> dict[str, Any]:  # noqa: A002
    memory = memories.delete(ctx.user_id, id)
    return {"deleted": True, "id": memory.id}
