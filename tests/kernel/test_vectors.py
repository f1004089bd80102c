from __future__ import annotations

import math

import pytest

from kody.vectors import index
from kody.vectors.models import EMBEDDING_DIMENSIONS

pytestmark = pytest.mark.django_db


def unit(axis: int) -> list[float]:
    vector = [0.0] * EMBEDDING_DIMENSIONS
    vector[axis] = 1.0
    return vector


def test_the_owner_finds_their_vectors_nearest_first(owner_id):
    index.upsert(owner_id, "memory:1", unit(0), {"kind": "memory"})
    index.upsert(owner_id, "memory:2", unit(1), {"kind": "memory"})
    matches = index.query(owner_id, unit(0), top_k=2)
    assert [m.vector_id for m in matches] == ["memory:1", "memory:2"]
    assert math.isclose(matches[0].score, 1.0)


def test_an_outsider_never_sees_another_users_vectors(owner_id, outsider_id):
    index.upsert(owner_id, "memory:secret", unit(0), {"text": "secret"})
    index.upsert(outsider_id, "memory:mine", unit(5))
    assert [m.vector_id for m in index.query(outsider_id, unit(0), top_k=10)] == ["memory:mine"]
    assert index.delete(outsider_id, ["memory:secret"]) == 0
    assert [m.vector_id for m in index.query(owner_id, unit(0))] == ["memory:secret"]


def test_a_row_whose_owner_column_disagrees_is_not_returned(owner_id, outsider_id):
    from kody.vectors.models import VectorEntry

    index.upsert(owner_id, "memory:1", unit(0))
    VectorEntry.objects.filter(vector_id="memory:1").update(owner_user_id=outsider_id)
    assert index.query(owner_id, unit(0)) == []
    assert index.query(outsider_id, unit(0)) == []


def test_builtins_only_when_asked_and_metadata_filters(owner_id):
    index.upsert_builtin("capability:search", unit(0), {"kind": "capability"})
    index.upsert(owner_id, "job:1", unit(1), {"kind": "job"})
    assert [m.vector_id for m in index.query(owner_id, unit(0))] == ["job:1"]
    found = index.query(owner_id, unit(0), include_builtin=True)
    assert [m.namespace for m in found] == [index.BUILTIN_NAMESPACE, owner_id]
    assert [
        m.vector_id
        for m in index.query(owner_id, unit(0), include_builtin=True, metadata={"kind": "job"})
    ] == ["job:1"]
    with pytest.raises(ValueError):
        index.query(index.BUILTIN_NAMESPACE, unit(0))


def test_deleting_a_user_removes_only_their_vectors(owner_id, outsider_id):
    index.upsert(owner_id, "a", unit(0))
    index.upsert(outsider_id, "b", unit(0))
    assert index.delete_all_for_user(owner_id) == 1
    assert [m.vector_id for m in index.query(outsider_id, unit(0))] == ["b"]
