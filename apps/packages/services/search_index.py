"""Keeping ``kody_vectors`` in step with the rows it is derived from.

Each upsert records a SHA-256 over the embedding model, its dimensions and version,
``FINGERPRINT_VERSION``, the truncated embed text and the canonical metadata in
``vector_embed_fingerprints`` (``user_id`` there is the vector namespace). A later upsert with
the same hash embeds nothing and writes no vector. ``force`` ignores the hashes: needed after
losing vectors while the skip rows survived. Bump ``FINGERPRINT_VERSION`` when the metadata
contract changes.

Writes reach this module through ``apps.packages.services.index_debt.changed``, which embeds
inline or defers to a task. ``sync`` times every small embed call it makes
(``speed``), which is what ``KODY_EMBED_MODE=auto`` decides by.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q

from apps.packages.models import VectorEmbedFingerprint
from kody.embeddings import Embedder, get_embedder
from kody.vectors import index

FINGERPRINT_VERSION = 1
EMBED_TEXT_LIMIT = 2000  # characters of embed text that count (and are embedded)


# A call this small is what a write makes; reindex batches are not a request's latency.
SMALL_CALL_TEXTS = 8
SPEED_SMOOTHING = 0.2


class Speed:
    """A moving average of how long the embedder takes per small call, in this process.
    The first call is not counted: it loads the model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0
        self.average_ms: float | None = None

    def record(self, texts: int, seconds: float) -> None:
        if texts > SMALL_CALL_TEXTS:
            return
        with self._lock:
            self._calls += 1
            if self._calls == 1:
                return
            ms = seconds * 1000
            previous = self.average_ms
            self.average_ms = (
                ms if previous is None else previous + SPEED_SMOOTHING * (ms - previous)
            )

    def slow(self) -> bool:
        average = self.average_ms
        return average is not None and average > settings.KODY_EMBED_INLINE_BUDGET_MS

    def reset(self) -> None:
        with self._lock:
            self._calls, self.average_ms = 0, None


speed = Speed()


def embed_timed(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    speed.record(len(texts), time.perf_counter() - started)
    return vectors


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
        vectors = embed_timed(embedder, [d.text[:EMBED_TEXT_LIMIT] for d in todo])
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
