"""The vector index. Every user query filters on the namespace *and* the owner column, as the
original filtered on its Vectorize namespace and the ``userId`` metadata, and reads only the
vectors of the current embedding model (``kody.embeddings.model_tag``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from pgvector.django import CosineDistance

from kody.embeddings import model_tag
from kody.vectors.models import VectorEntry

# Stable user ids are lowercase hex, so this can never be an account's namespace.
BUILTIN_NAMESPACE = "__kody_builtin__"


@dataclass(frozen=True)
class Match:
    namespace: str
    vector_id: str
    score: float
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Item:
    vector_id: str
    embedding: Sequence[float]
    metadata: dict[str, Any]


def _owner(user_id: str) -> str:
    if not user_id or user_id == BUILTIN_NAMESPACE:
        raise ValueError("a user vector needs the owner's stable user id")
    return user_id


def _upsert(namespace: str, items: Sequence[Item]) -> None:
    _write([(namespace, item) for item in items])


def _write(rows: Sequence[tuple[str, Item]]) -> None:
    tag = model_tag()
    entries = [
        VectorEntry(
            namespace=namespace,
            vector_id=item.vector_id,
            owner_user_id=namespace,
            embedding=list(item.embedding),
            metadata=item.metadata,
            model=tag,
        )
        for namespace, item in rows
    ]
    VectorEntry.objects.bulk_create(
        entries,
        update_conflicts=True,
        unique_fields=["namespace", "vector_id"],
        update_fields=["owner_user_id", "embedding", "metadata", "model", "updated_at"],
    )


def upsert_for_owners(rows: Sequence[tuple[str, Item]]) -> None:
    """One write for many users' vectors (a reindex batch); each row is its owner's."""
    _write([(_owner(user_id), item) for user_id, item in rows])


def upsert(
    user_id: str, vector_id: str, embedding: Sequence[float], metadata: dict | None = None
) -> None:
    _upsert(_owner(user_id), [Item(vector_id, embedding, metadata or {})])


def upsert_many(user_id: str, items: Sequence[Item]) -> None:
    _upsert(_owner(user_id), items)


def upsert_builtin(
    vector_id: str, embedding: Sequence[float], metadata: dict | None = None
) -> None:
    _upsert(BUILTIN_NAMESPACE, [Item(vector_id, embedding, metadata or {})])


def upsert_builtin_many(items: Sequence[Item]) -> None:
    _upsert(BUILTIN_NAMESPACE, items)


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
    return _nearest(scope, embedding, top_k, metadata)


def query_builtin(
    embedding: Sequence[float], *, top_k: int = 10, metadata: dict[str, Any] | None = None
) -> list[Match]:
    scope = Q(namespace=BUILTIN_NAMESPACE, owner_user_id=BUILTIN_NAMESPACE)
    return _nearest(scope, embedding, top_k, metadata)


def _nearest(
    scope: Q, embedding: Sequence[float], top_k: int, metadata: dict[str, Any] | None
) -> list[Match]:
    rows = VectorEntry.objects.filter(scope, model=model_tag())
    if metadata:
        rows = rows.filter(metadata__contains=metadata)
    rows = rows.annotate(distance=CosineDistance("embedding", list(embedding))).order_by("distance")
    with transaction.atomic():
        # pgvector filters after the HNSW scan; a wider candidate list keeps recall@10 above
        # 0.95 in a namespace sharing the index with many others (benchmarks/vectors.py).
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL hnsw.ef_search = {int(settings.KODY_VECTOR_EF_SEARCH)}")
        found = list(rows[:top_k])
    return [
        Match(row.namespace, row.vector_id, 1.0 - float(row.distance), row.metadata)
        for row in found
    ]


def delete(user_id: str, vector_ids: Iterable[str]) -> int:
    owner = _owner(user_id)
    deleted, _ = VectorEntry.objects.filter(
        namespace=owner, owner_user_id=owner, vector_id__in=list(vector_ids)
    ).delete()
    return deleted


def delete_builtin(vector_ids: Iterable[str]) -> int:
    deleted, _ = VectorEntry.objects.filter(
        namespace=BUILTIN_NAMESPACE, vector_id__in=list(vector_ids)
    ).delete()
    return deleted


def delete_all_for_user(user_id: str) -> int:
    owner = _owner(user_id)
    deleted, _ = VectorEntry.objects.filter(Q(namespace=owner) | Q(owner_user_id=owner)).delete()
    return deleted


def ids_after(
    namespace: str | None, kind: str, after: tuple[str, str] | None, limit: int
) -> list[tuple[str, str]]:
    """(namespace, vector_id) of vectors of one metadata ``kind``, keyset-paged, for sweeps
    that look for vectors whose source row is gone. ``namespace`` None means every one."""
    rows = VectorEntry.objects.filter(metadata__kind=kind)
    if namespace is not None:
        rows = rows.filter(namespace=namespace)
    if after is not None:
        rows = rows.filter(
            Q(namespace__gt=after[0]) | Q(namespace=after[0], vector_id__gt=after[1])
        )
    return list(
        rows.order_by("namespace", "vector_id").values_list("namespace", "vector_id")[:limit]
    )


def delete_in_namespace(namespace: str, vector_ids: Iterable[str]) -> int:
    """Orphan cleanup by a fleet sweep, which already knows the exact namespace."""
    deleted, _ = VectorEntry.objects.filter(
        namespace=namespace, vector_id__in=list(vector_ids)
    ).delete()
    return deleted


# Public community listings share one namespace; ``owner_user_id`` is the publisher, so
# ``delete_all_for_user`` still removes a deleted account's listing vectors.
COMMUNITY_NAMESPACE = "__kody_community__"


def upsert_community(owner_user_id: str, item: Item) -> None:
    tag = model_tag()
    VectorEntry.objects.bulk_create(
        [
            VectorEntry(
                namespace=COMMUNITY_NAMESPACE,
                vector_id=item.vector_id,
                owner_user_id=_owner(owner_user_id),
                embedding=list(item.embedding),
                metadata=item.metadata,
                model=tag,
            )
        ],
        update_conflicts=True,
        unique_fields=["namespace", "vector_id"],
        update_fields=["owner_user_id", "embedding", "metadata", "model", "updated_at"],
    )


def query_community(embedding: Sequence[float], *, top_k: int = 100) -> list[Match]:
    return _nearest(Q(namespace=COMMUNITY_NAMESPACE), embedding, top_k, None)


def delete_community(vector_ids: Iterable[str]) -> int:
    deleted, _ = VectorEntry.objects.filter(
        namespace=COMMUNITY_NAMESPACE, vector_id__in=list(vector_ids)
    ).delete()
    return deleted
