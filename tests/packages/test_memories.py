"""Memories over the agent API: the owner's story, and the outsider who finds nothing."""

from __future__ import annotations

import pytest

from apps.packages.models import McpMemory, McpMemoryConversationSuppression, VectorEmbedFingerprint
from kody.vectors.models import VectorEntry
from tests.kernel.factories import VectorEntryFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

TEA = {
    "subject": "Prefers green tea",
    "summary": "The user drinks green tea in the morning and dislikes coffee.",
    "category": "preference",
    "tags": ["drinks"],
    "dedupeKey": "drink:morning",
}
EDITOR = {
    "subject": "Uses Neovim",
    "summary": "Writes code in Neovim with a dark colour scheme.",
    "category": "tooling",
}
TRIP = {
    "subject": "Trip to Lisbon in May",
    "summary": "Flying to Portugal for a conference; book a hotel near the river.",
    "category": "travel",
}


def test_owner_saves_gets_and_searches_a_memory(as_owner, owner):
    memory = as_owner.call("memoryUpsert", **TEA)["memory"]
    assert memory["subject"] == "Prefers green tea"
    assert memory["status"] == "active" and memory["category"] == "preference"

    row = McpMemory.objects.get(id=memory["id"])
    assert row.user_id == owner.stable_user_id
    vector = VectorEntry.objects.get(vector_id=f"memory_{row.id}")
    assert vector.namespace == vector.owner_user_id == owner.stable_user_id
    assert vector.metadata == {
        "kind": "memory",
        "userId": owner.stable_user_id,
        "status": "active",
        "category": "preference",
    }

    got = as_owner.call("memoryGet", id=memory["id"])["memory"]
    assert got["summary"] == TEA["summary"] and got["lastAccessedAt"] is not None


def test_search_ranks_the_matching_memory_first(as_owner):
    ids = {
        name: as_owner.call("memoryUpsert", **body)["memory"]["id"]
        for name, body in (("tea", TEA), ("editor", EDITOR), ("trip", TRIP))
    }
    results = as_owner.call("memorySearch", query="what does the user drink with breakfast")[
        "results"
    ]
    assert results[0]["id"] == ids["tea"]
    assert {"id", "subject", "summary", "score"} <= set(results[0])
    assert results[0]["score"] > results[-1]["score"]

    travel = as_owner.call("memorySearch", query="Lisbon hotel")["results"]
    assert travel[0]["id"] == ids["trip"]

    only_tooling = as_owner.call("memorySearch", query="tea", category="tooling")["results"]
    assert [r["id"] for r in only_tooling] in ([], [ids["editor"]])


def test_dedupe_key_updates_instead_of_duplicating(as_owner, owner):
    first = as_owner.call("memoryUpsert", **TEA)["memory"]
    second = as_owner.call("memoryUpsert", **{**TEA, "summary": "Now prefers oolong tea."})[
        "memory"
    ]
    assert second["id"] == first["id"]
    assert McpMemory.objects.filter(user_id=owner.stable_user_id).count() == 1
    assert McpMemory.objects.get(id=first["id"]).summary == "Now prefers oolong tea."


def test_an_unchanged_upsert_embeds_nothing(as_owner, owner):
    memory = as_owner.call("memoryUpsert", **TEA)["memory"]
    fp = VectorEmbedFingerprint.objects.get(user_id=owner.stable_user_id)
    before = VectorEntry.objects.get(vector_id=f"memory_{memory['id']}").updated_at
    as_owner.call("memoryUpsert", **TEA)
    assert VectorEntry.objects.get(vector_id=f"memory_{memory['id']}").updated_at == before
    as_owner.call("memoryUpsert", **{**TEA, "category": "habit"})
    changed = VectorEmbedFingerprint.objects.get(user_id=owner.stable_user_id)
    assert changed.fingerprint != fp.fingerprint
    vector = VectorEntry.objects.get(vector_id=f"memory_{memory['id']}")
    assert vector.updated_at > before and vector.metadata["category"] == "habit"


def test_verify_shows_related_memories_and_writes_nothing(as_owner, owner):
    assert as_owner.call("memoryVerify", **TEA)["relatedMemories"] == []
    saved = as_owner.call("memoryUpsert", **TEA)["memory"]
    candidate = {"subject": "Likes tea", "summary": "Drinks green tea every morning."}
    reply = as_owner.call("memoryVerify", **candidate)
    assert reply["candidate"]["subject"] == "Likes tea"
    assert [r["memory"]["id"] for r in reply["relatedMemories"]][:1] == [saved["id"]]
    assert McpMemory.objects.filter(user_id=owner.stable_user_id).count() == 1


def test_delete_removes_the_vector_and_hides_the_memory(as_owner, owner):
    memory = as_owner.call("memoryUpsert", **TEA)["memory"]
    assert as_owner.call("memoryDelete", id=memory["id"]) == {"deleted": True, "id": memory["id"]}
    assert not VectorEntry.objects.filter(namespace=owner.stable_user_id).exists()
    assert not VectorEmbedFingerprint.objects.filter(user_id=owner.stable_user_id).exists()
    assert as_owner.error("memoryGet", 404, id=memory["id"])["code"] == "memory_not_found"
    assert as_owner.call("memorySearch", query="green tea")["results"] == []


def test_outsider_cannot_read_change_or_find_the_owners_memory(as_owner, as_outsider):
    memory = as_owner.call("memoryUpsert", **TEA)["memory"]
    mid = memory["id"]
    for name, args in (
        ("memoryGet", {"id": mid}),
        ("memoryDelete", {"id": mid}),
        ("memoryUpsert", {**EDITOR, "memoryId": mid}),
        ("memoryVerify", {**EDITOR, "memoryId": mid}),
    ):
        error = as_outsider.error(name, 404, **args)
        assert error["code"] == "memory_not_found"
        assert "tea" not in str(error).lower()
    assert as_outsider.call("memorySearch", query="green tea")["results"] == []
    assert as_outsider.call("memoryVerify", **TEA)["relatedMemories"] == []
    found = as_outsider.call("search", query="green tea morning drink")["results"]
    assert all(r["type"] == "capability" for r in found)
    # The owner's memory is untouched.
    assert as_owner.call("memoryGet", id=mid)["memory"]["subject"] == TEA["subject"]


def test_search_ignores_a_crafted_vector_pointing_at_another_users_memory(
    as_owner, as_outsider, outsider
):
    theirs = as_owner.call("memoryUpsert", **TEA)["memory"]
    # A vector in the outsider's own namespace that names the owner's memory id: the row
    # lookup is scoped by owner too, so it still finds nothing.
    source = VectorEntry.objects.get(vector_id=f"memory_{theirs['id']}")
    VectorEntryFactory(
        namespace=outsider.stable_user_id,
        vector_id=source.vector_id,
        embedding=list(source.embedding),
        metadata={**source.metadata, "userId": outsider.stable_user_id},
        model=source.model,
    )
    assert as_outsider.call("memorySearch", query="green tea")["results"] == []
    # Asking for another namespace in the call itself is refused by the schema.
    error = as_outsider.error("memorySearch", 422, query="tea", namespace=source.namespace)
    assert error["code"] == "invalid_input"


def test_conversation_suppression_hides_a_memory_already_surfaced(as_owner, owner):
    memory = as_owner.call("memoryUpsert", **TEA)["memory"]
    first = as_owner.call("memorySearch", query="green tea", conversationId="conv-1")["results"]
    assert [r["id"] for r in first] == [memory["id"]]
    assert (
        as_owner.call("memorySearch", query="green tea", conversationId="conv-1")["results"] == []
    )
    again = as_owner.call("memorySearch", query="green tea", conversationId="conv-2")["results"]
    assert [r["id"] for r in again] == [memory["id"]]
    assert (
        McpMemoryConversationSuppression.objects.filter(user_id=owner.stable_user_id).count() == 2
    )


def test_bad_input_is_a_coded_422_and_writes_nothing(as_owner, owner):
    error = as_owner.error("memoryUpsert", 422, subject="", summary="x")
    assert error["code"] == "invalid_input"
    as_owner.error("memorySearch", 422, query="tea", limit=0)
    assert not McpMemory.objects.filter(user_id=owner.stable_user_id).exists()
