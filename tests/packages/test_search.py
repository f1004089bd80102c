"""The builtin search: capabilities in the reserved namespace, plus the caller's own memories."""

from __future__ import annotations

import pytest

from apps.packages.models import VectorEmbedFingerprint
from apps.packages.services.search import index_capabilities
from kody.capabilities import all_capabilities
from kody.vectors.index import BUILTIN_NAMESPACE
from kody.vectors.models import VectorEntry
from tests.kernel.factories import VectorEntryFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_capability_vectors_live_in_the_builtin_namespace():
    result, stale = index_capabilities()
    names = {c.name for c in all_capabilities()}
    assert result.embedded == len(names) and stale == 0
    rows = VectorEntry.objects.filter(namespace=BUILTIN_NAMESPACE)
    assert {r.vector_id for r in rows} == names
    memory_upsert = rows.get(vector_id="memoryUpsert")
    assert memory_upsert.metadata == {"kind": "builtin", "domain": "meta"}
    assert VectorEmbedFingerprint.objects.filter(user_id=BUILTIN_NAMESPACE).count() == len(names)

    again, _ = index_capabilities()
    assert (again.embedded, again.skipped) == (0, len(names))


def test_a_retired_capability_loses_its_vector():
    VectorEntryFactory(
        namespace=BUILTIN_NAMESPACE,
        vector_id="goneCapability",
        metadata={"kind": "builtin", "domain": "old"},
    )
    _, stale = index_capabilities()
    assert stale == 1
    assert not VectorEntry.objects.filter(vector_id="goneCapability").exists()


def test_search_finds_the_right_capability(as_owner):
    index_capabilities()
    results = as_owner.call("search", query="save a long-term memory about the user")["results"]
    top = [r["name"] for r in results[:3] if r["type"] == "capability"]
    assert "memoryUpsert" in top
    assert all("inputSchema" in r for r in results if r["type"] == "capability")

    values = as_owner.call("search", query="store a named value", domain="values")["results"]
    assert values and {r["domain"] for r in values} == {"values"}
    assert values[0]["name"] == "valueSet"

    exact = as_owner.call("search", query="valueDelete")["results"]
    assert exact[0]["name"] == "valueDelete"


def test_operator_capabilities_are_not_offered_to_users(as_owner):
    index_capabilities()
    results = as_owner.call("search", query="operator view of a user's usage meter", limit=50)
    assert not [r for r in results["results"] if r.get("domain") == "admin"]


def test_search_includes_only_the_callers_memories(as_owner, as_outsider):
    index_capabilities()
    memory = as_owner.call(
        "memoryUpsert", subject="Dog named Biscuit", summary="The user has a beagle called Biscuit."
    )["memory"]
    mine = as_owner.call("search", query="Biscuit the beagle")["results"]
    assert mine[0] == {
        "type": "memory",
        "id": memory["id"],
        "subject": "Dog named Biscuit",
        "summary": "The user has a beagle called Biscuit.",
        "score": mine[0]["score"],
    }
    theirs = as_outsider.call("search", query="Biscuit the beagle")["results"]
    assert theirs and all(r["type"] == "capability" for r in theirs)
