"""The vector index. Every user query filters on the namespace *and* the owner column, as the
original filtered on its Vectorize namespace and the ``userId`` metadata."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from pgvector.django import CosineDistance

from kody.vectors.models import VectorEntry

# Stable user ids are lowercase hex, so this can never be an account's namespace.
BUILTIN_NAMESPACE = "__kody_builtin__"


@dataclass(frozen=True)
class Match:
    namespace: str
    vector_id: str
    score: float
    metadata: dict[str, Any]


def _owner(user_id: str) -> str:
    if not user_id or user_id == BUILTIN_NAMESPACE:
        raise ValueError("a user vector needs the owner's stable user id")
    return user_id


def _upsert(namespace: str, vector_id: str, embedding: Sequence[float], metadata: dict) -> None:
    row = VectorEntry(
        namespace=namespace,
        vector_id=vector_id,
        owner_user_id=namespace,
        embedding=list(embedding),
        metadata=metadata,
    )
    VectorEntry.objects.bulk_create(
        [row],
        update_conflicts=True,
        unique_fields=["namespace", "vector_id"],
        update_fields=["owner_user_id", "embedding", "metadata", "updated_at"],
    )


def upsert(
    user_id: str, vector_id: str, embedding: Sequence[float], metadata: dict | None = None
) -> None:
    _upsert(_owner(user_id), vector_id, embedding, metadata or {})


def upsert_builtin(
    vector_id: str, embedding: Sequence[float], metadata: dict | None = None
) -> None:
    _upsert(BUILTIN_NAMESPACE, vector_id, embedding, metadata or {})


def query(
    user_id: str,
    embedding: Sequence[float],
    *,
    top_k: int = 10,
    include_builtin: bool = False,
    metadata: dict[str, Any] | None = None,
) -> list[Match]:
    owner = _owner(user_id)
    scope = Q(namespace=owner, owner_user_id=owner)
    if include_builtin:
        scope |= Q(namespace=BUILTIN_NAMESPACE, owner_user_id=BUILTIN_NAMESPACE)
    rows = VectorEntry.objects.filter(scope)
    if metadata:
        rows = rows.filter(metadata__contains=metadata)
    rows = rows.annotate(distance=CosineDistance("embedding", list(embedding))).order_by("distance")
    return [
        Match(row.namespace, row.vector_id, 1.0 - float(row.distance), row.metadata)
        for row in rows[:top_k]
    ]


def delete(user_id: str, vector_ids: Iterable[str]) -> int:
    owner = _owner(user_id)
    deleted, _ = VectorEntry.objects.filter(
        namespace=owner, owner_user_id=owner, vector_id__in=list(vector_ids)
    ).delete()
    return deleted


def delete_all_for_user(user_id: str) -> int:
    owner = _owner(user_id)
    deleted, _ = VectorEntry.objects.filter(Q(namespace=owner) | Q(owner_user_id=owner)).delete()
    return deleted
