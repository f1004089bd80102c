"""Keeping ``kody_vectors`` in step with the rows it is derived from.

Each upsert records a SHA-256 over the embedding model, its dimensions and version,
``FINGERPRINT_VERSION``, the truncated embed text and the canonical metadata in
``vector_embed_fingerprints`` (``user_id`` there is the vector namespace). A later upsert with
the same hash embeds nothing and writes no vector. ``force`` ignores the hashes: needed after
losing vectors while the skip rows survived. Bump ``FINGERPRINT_VERSION`` when the metadata
contract changes.

Embedding is inline: the default model embeds a short text in tens of microseconds
(ADR 0009), so a write and its vector commit together and nothing is pending afterwards.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from apps.packages.models import McpMemory, VectorEmbedFingerprint
from apps.packages.models.mcp import MemoryStatus
from kody.embeddings import Embedder, get_embedder
from kody.vectors import index
from kody.vectors.ids import vector_id

FINGERPRINT_VERSION = 1
EMBED_TEXT_LIMIT = 2000  # characters of embed text that count (and are embedded)


@dataclass(frozen=True)
class Doc:
    namespace: str  # the owner's stable user id, or index.BUILTIN_NAMESPACE
    vector_id: str
    text: str
    metadata: dict[str, Any]


@dataclass
class SyncResult:
    embedded: int = 0
    skipped: int = 0
    removed: int = 0  # vectors of rows that should no longer have one


def fingerprint(doc: Doc, embedder: Embedder) -> str:
    canonical = json.dumps(doc.metadata, sort_keys=True, separators=(",", ":"))
    parts = [
        embedder.model,
        str(embedder.dimensions),
        embedder.version,
        str(FINGERPRINT_VERSION),
        doc.text[:EMBED_TEXT_LIMIT],
        canonical,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def sync(docs: Sequence[Doc], *, force: bool = False) -> SyncResult:
    """Embed and upsert the docs whose fingerprint changed (all of them with ``force``)."""
    if not docs:
        return SyncResult()
    embedder = get_embedder()
    prints = {(d.namespace, d.vector_id): fingerprint(d, embedder) for d in docs}
    known = {} if force else _known(prints)
    todo = [
        d
        for d in docs
        if known.get((d.namespace, d.vector_id)) != prints[(d.namespace, d.vector_id)]
    ]
    if todo:
        vectors = embedder.embed([d.text[:EMBED_TEXT_LIMIT] for d in todo])
        builtin: list[index.Item] = []
        owned: list[tuple[str, index.Item]] = []
        for doc, vector in zip(todo, vectors, strict=True):
            item = index.Item(doc.vector_id, vector, doc.metadata)
            if doc.namespace == index.BUILTIN_NAMESPACE:
                builtin.append(item)
            else:
                owned.append((doc.namespace, item))
        if builtin:
            index.upsert_builtin_many(builtin)
        if owned:
            index.upsert_for_owners(owned)
        _record(todo, prints)
    return SyncResult(embedded=len(todo), skipped=len(docs) - len(todo))


def _key(doc: Doc) -> tuple[str, str]:
    return (doc.namespace, doc.vector_id)


def remove(namespace: str, vector_ids: Iterable[str]) -> int:
    ids = list(vector_ids)
    if namespace == index.BUILTIN_NAMESPACE:
        deleted = index.delete_builtin(ids)
    else:
        deleted = index.delete_in_namespace(namespace, ids)
    VectorEmbedFingerprint.objects.filter(user_id=namespace, vector_id__in=ids).delete()
    return deleted


def _known(prints: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    match = Q()
    for namespace, vid in prints:
        match |= Q(user_id=namespace, vector_id=vid)
    rows = VectorEmbedFingerprint.objects.filter(match).values_list(
        "user_id", "vector_id", "fingerprint"
    )
    return {(ns, vid): fp for ns, vid, fp in rows}


def _record(docs: Sequence[Doc], prints: dict[tuple[str, str], str]) -> None:
    VectorEmbedFingerprint.objects.bulk_create(
        [
            VectorEmbedFingerprint(
                user_id=d.namespace,
                vector_id=d.vector_id,
                fingerprint=prints[_key(d)],
            )
            for d in docs
        ],
        update_conflicts=True,
        unique_fields=["user_id", "vector_id"],
        update_fields=["fingerprint", "updated_at"],
    )


# --- memories ------------------------------------------------------------------------------

MEMORY_PREFIX = "memory"


def memory_vector_id(memory_id: str) -> str:
    return vector_id(MEMORY_PREFIX, memory_id)


def memory_doc(memory: McpMemory) -> Doc:
    metadata: dict[str, Any] = {"kind": "memory", "userId": memory.user_id, "status": memory.status}
    if memory.category:
        metadata["category"] = memory.category
    text = "\n".join(
        part
        for part in (memory.subject, memory.summary, memory.details, " ".join(memory.tags_json))
        if part
    )
    return Doc(memory.user_id, memory_vector_id(memory.id), text, metadata)


def index_memories(memories: Sequence[McpMemory], *, force: bool = False) -> SyncResult:
    """Active and archived memories have a vector; a deleted one has none."""
    live = [m for m in memories if m.status != MemoryStatus.DELETED]
    result = sync([memory_doc(m) for m in live], force=force)
    gone: dict[str, list[str]] = defaultdict(list)
    for m in memories:
        if m.status == MemoryStatus.DELETED:
            gone[m.user_id].append(memory_vector_id(m.id))
    for namespace, ids in gone.items():
        result.removed += remove(namespace, ids)
    return result
