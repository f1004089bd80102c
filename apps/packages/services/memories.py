"""Long-term memories: durable, user-curated notes an agent keeps for its person.

Every read and write is scoped by the owner's stable user id; another user's memory id is
"not found", never "forbidden". Search is hybrid: nearest vectors in the owner's namespace
(filtered by namespace, owner column and ``userId``/status metadata) merged with a keyword
match over the owner's rows, and every hit is re-read from ``mcp_memories`` by owner before
it is returned — a vector alone never reveals a memory.

Conversation suppressions: a search that names a ``conversationId`` records what it surfaced,
and later searches in that conversation leave those memories out until the suppression
expires. Expired rows are pruned by the ``packages_retention`` lane once unseen for 90 days.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts import policy
from apps.packages.models import McpMemory, McpMemoryConversationSuppression
from apps.packages.models.mcp import MemoryStatus
from apps.packages.services import index_debt
from kody.embeddings import embed
from kody.errors import NotFound
from kody.vectors import index
from kody.vectors.ids import parse

SUPPRESSION_TTL = timedelta(hours=24)
SUPPRESSION_RETENTION = timedelta(days=90)
SEMANTIC_WEIGHT = 0.7
KEYWORD_WEIGHT = 0.3
MIN_SEMANTIC_SCORE = 0.15
RELATED_LIMIT = 5


class MemoryNotFound(NotFound):
    code = "memory_not_found"
    message = "No memory with that id."


@dataclass(frozen=True)
class Hit:
    memory: McpMemory
    score: float


def to_json(memory: McpMemory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "subject": memory.subject,
        "summary": memory.summary,
        "details": memory.details,
        "category": memory.category,
        "tags": list(memory.tags_json),
        "dedupeKey": memory.dedupe_key,
        "status": memory.status,
        "createdAt": memory.created_at.isoformat(),
        "updatedAt": memory.updated_at.isoformat(),
        "lastAccessedAt": memory.last_accessed_at.isoformat() if memory.last_accessed_at else None,
    }


def _owned(user_id: str, memory_id: str, *, lock: bool = False) -> McpMemory:
    rows = McpMemory.objects.filter(user_id=user_id, id=memory_id).exclude(
        status=MemoryStatus.DELETED
    )
    if lock:
        rows = rows.select_for_update()
    found = rows.first()
    if found is None:
        raise MemoryNotFound(details={"id": memory_id})
    return found


def upsert(
    user_id: str,
    *,
    subject: str,
    summary: str,
    details: str = "",
    category: str | None = None,
    tags: Sequence[str] = (),
    dedupe_key: str | None = None,
    memory_id: str | None = None,
) -> McpMemory:
    """Update ``memory_id`` (or the memory with the same ``dedupe_key``), else create one."""
    with transaction.atomic():
        memory = _target(user_id, memory_id, dedupe_key)
        before = 0 if memory._state.adding else _text_bytes(memory)
        memory.subject = subject.strip()
        memory.summary = summary.strip()
        memory.details = details.strip()
        memory.category = category or None
        memory.tags_json = sorted({t.strip() for t in tags if t.strip()})
        memory.dedupe_key = dedupe_key or memory.dedupe_key
        memory.status = MemoryStatus.ACTIVE
        grown = _text_bytes(memory) - before
        # Reserve the growth before saving: over storage_bytes the coded limit error rolls the
        # transaction back and nothing is stored.
        policy.reserve_storage_bytes(user_id, grown)
        try:
            memory.save()
        except BaseException:
            policy.release_storage_bytes(user_id, grown)
            raise
        if grown < 0:
            freed = -grown
            transaction.on_commit(lambda: policy.release_storage_bytes(user_id, freed))
        index_debt.changed("memory", user_id, [memory.id])
    return memory


def _text_bytes(memory: McpMemory) -> int:
    """A memory's weight against storage_bytes: its text, UTF-8 encoded. A deleted memory keeps
    its row (and weight) until it is purged, as the reconciliation measures it."""
    text = (memory.subject, memory.summary, memory.details, memory.dedupe_key or "")
    return sum(len(part.encode()) for part in text) + sum(
        len(t.encode()) for t in memory.tags_json or ()
    )


def _target(user_id: str, memory_id: str | None, dedupe_key: str | None) -> McpMemory:
    if memory_id:
        return _owned(user_id, memory_id, lock=True)
    if dedupe_key:
        same = (
            McpMemory.objects.select_for_update()
            .filter(user_id=user_id, dedupe_key=dedupe_key)
            .exclude(status=MemoryStatus.DELETED)
            .order_by("created_at")
            .first()
        )
        if same is not None:
            return same
    return McpMemory(user_id=user_id)


def get(user_id: str, memory_id: str) -> McpMemory:
    memory = _owned(user_id, memory_id)
    memory.last_accessed_at = timezone.now()
    McpMemory.objects.filter(pk=memory.pk).update(last_accessed_at=memory.last_accessed_at)
    return memory


def recent(user_id: str, *, limit: int) -> list[McpMemory]:
    rows = McpMemory.objects.filter(user_id=user_id, status=MemoryStatus.ACTIVE)
    return list(rows.order_by("-updated_at", "id")[:limit])


def delete(user_id: str, memory_id: str) -> McpMemory:
    with transaction.atomic():
        memory = _owned(user_id, memory_id, lock=True)
        memory.status = MemoryStatus.DELETED
        memory.deleted_at = timezone.now()
        memory.save(update_fields=["status", "deleted_at", "updated_at"])
        McpMemoryConversationSuppression.objects.filter(user_id=user_id, memory=memory).delete()
        index_debt.changed("memory", user_id, [memory.id])
    return memory


def search(
    user_id: str,
    query: str,
    *,
    limit: int = 10,
    category: str | None = None,
    conversation_id: str | None = None,
) -> list[Hit]:
    hidden = _suppressed(user_id, conversation_id) if conversation_id else set()
    hits = [h for h in rank(user_id, query, limit=limit + len(hidden), category=category)]
    hits = [h for h in hits if h.memory.id not in hidden][:limit]
    if conversation_id and hits:
        _suppress(user_id, conversation_id, [h.memory for h in hits])
    return hits


def rank(
    user_id: str, query: str, *, limit: int, category: str | None = None, exclude: str = ""
) -> list[Hit]:
    semantic = _semantic(user_id, query, limit=max(limit * 4, 40), category=category)
    keyword = _keyword(user_id, query, category=category)
    ids = (set(semantic) | set(keyword)) - {exclude}
    rows = McpMemory.objects.filter(user_id=user_id, status=MemoryStatus.ACTIVE, id__in=ids)
    if category:
        rows = rows.filter(category=category)
    hits = [
        Hit(m, SEMANTIC_WEIGHT * semantic.get(m.id, 0.0) + KEYWORD_WEIGHT * keyword.get(m.id, 0.0))
        for m in rows
    ]
    hits.sort(key=lambda h: (-h.score, h.memory.id))
    return hits[:limit]


def verify(
    user_id: str,
    *,
    subject: str,
    summary: str,
    details: str = "",
    category: str | None = None,
    tags: Sequence[str] = (),
    dedupe_key: str | None = None,
    memory_id: str | None = None,
) -> dict[str, Any]:
    """What already exists near a candidate memory, so the agent decides: upsert, delete or skip.
    Reads only."""
    if memory_id:
        _owned(user_id, memory_id)
    query = "\n".join(p for p in (subject, summary, details, " ".join(tags)) if p)
    related = rank(user_id, query, limit=RELATED_LIMIT, exclude=memory_id or "")
    same_key: list[McpMemory] = []
    if dedupe_key:
        same_key = list(
            McpMemory.objects.filter(
                user_id=user_id, dedupe_key=dedupe_key, status=MemoryStatus.ACTIVE
            )
        )
    seen = {h.memory.id for h in related}
    related += [Hit(m, 1.0) for m in same_key if m.id not in seen]
    return {
        "candidate": {
            "memoryId": memory_id,
            "subject": subject,
            "summary": summary,
            "details": details,
            "category": category,
            "tags": list(tags),
            "dedupeKey": dedupe_key,
        },
        "relatedMemories": [
            {"memory": _brief(h.memory), "score": round(h.score, 4)} for h in related
        ],
    }


def _brief(memory: McpMemory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "subject": memory.subject,
        "summary": memory.summary,
        "category": memory.category,
        "dedupeKey": memory.dedupe_key,
        "updatedAt": memory.updated_at.isoformat(),
    }


def _semantic(user_id: str, query: str, *, limit: int, category: str | None) -> dict[str, float]:
    metadata: dict[str, Any] = {"kind": "memory", "userId": user_id, "status": "active"}
    if category:
        metadata["category"] = category
    [vector] = embed([query])
    matches = index.query(user_id, vector, top_k=limit, metadata=metadata)
    scores: dict[str, float] = {}
    for match in matches:
        memory_id = parse("memory", match.vector_id)
        if memory_id is not None and match.score >= MIN_SEMANTIC_SCORE:
            scores[memory_id] = max(0.0, match.score)
    return scores


WORD_RE = re.compile(r"[\w-]{2,}", re.UNICODE)
KEYWORD_SCAN_LIMIT = 200


def terms(query: str) -> list[str]:
    return sorted({w.lower() for w in WORD_RE.findall(query)})[:12]


def _keyword(user_id: str, query: str, *, category: str | None) -> dict[str, float]:
    words = terms(query)
    if not words:
        return {}
    match = Q()
    for word in words:
        match |= (
            Q(subject__icontains=word) | Q(summary__icontains=word) | Q(details__icontains=word)
        )
    rows = McpMemory.objects.filter(match, user_id=user_id, status=MemoryStatus.ACTIVE)
    if category:
        rows = rows.filter(category=category)
    scores: dict[str, float] = {}
    for m in rows.order_by("-updated_at")[:KEYWORD_SCAN_LIMIT]:
        text = " ".join((m.subject, m.summary, m.details, " ".join(m.tags_json))).lower()
        subject = m.subject.lower()
        found = sum(1.0 if w in subject else 0.75 for w in words if w in text)
        scores[m.id] = found / len(words)
    return scores


def _suppressed(user_id: str, conversation_id: str) -> set[str]:
    return set(
        McpMemoryConversationSuppression.objects.filter(
            user_id=user_id, conversation_id=conversation_id, expires_at__gt=timezone.now()
        ).values_list("memory_id", flat=True)
    )


def _suppress(user_id: str, conversation_id: str, memories: Sequence[McpMemory]) -> None:
    now = timezone.now()
    McpMemoryConversationSuppression.objects.bulk_create(
        [
            McpMemoryConversationSuppression(
                user_id=user_id,
                conversation_id=conversation_id,
                memory=m,
                last_seen_at=now,
                expires_at=now + SUPPRESSION_TTL,
            )
            for m in memories
        ],
        update_conflicts=True,
        unique_fields=["user_id", "conversation_id", "memory"],
        update_fields=["last_seen_at", "expires_at"],
    )


def prune_suppressions(*, batch: int) -> int:
    """Expired suppressions not seen for 90 days (seed 000 retention); active ones stay."""
    now = timezone.now()
    ids = list(
        McpMemoryConversationSuppression.objects.filter(
            expires_at__lte=now, last_seen_at__lt=now - SUPPRESSION_RETENTION
        )
        .order_by("expires_at")
        .values_list("pk", flat=True)[:batch]
    )
    deleted, _ = McpMemoryConversationSuppression.objects.filter(pk__in=ids).delete()
    return deleted


def count_active(user_id: str) -> int:
    return McpMemory.objects.filter(user_id=user_id, status=MemoryStatus.ACTIVE).count()
