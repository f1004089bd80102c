"""The builtin ``search``: which capabilities (and, for the caller, which memories, jobs and
saved packages) fit a query.

Capability vectors live in the reserved ``__kody_builtin__`` namespace, one per registered
capability, kept current by ``index_capabilities`` (``manage.py reindex --kind capability``
after a release). A query reads the builtin namespace and the caller's own vectors (memories,
jobs, packages; never a hidden package); only capabilities the caller may call are returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.packages.services import memories, search_index, vector_kinds
from kody.capabilities import Capability, Context, all_capabilities, visible_to
from kody.embeddings import embed
from kody.vectors import index

NAME_MATCH_BONUS = 0.5


@dataclass(frozen=True)
class Result:
    score: float
    body: dict[str, Any]


def capability_doc(cap: Capability) -> search_index.Doc:
    text = "\n".join(p for p in (cap.name, cap.title, cap.description, cap.domain) if p)
    return search_index.Doc(
        index.BUILTIN_NAMESPACE, cap.name, text, {"kind": "builtin", "domain": cap.domain}
    )


def index_capabilities(*, force: bool = False) -> tuple[search_index.SyncResult, int]:
    """Upsert every registered capability; remove builtin vectors of capabilities gone."""
    caps = all_capabilities()
    result = search_index.sync([capability_doc(c) for c in caps], force=force)
    names = {c.name for c in caps}
    stale: list[str] = []
    after = None
    while page := index.ids_after(index.BUILTIN_NAMESPACE, "builtin", after, 500):
        stale += [vid for _, vid in page if vid not in names]
        after = page[-1]
    if stale:
        search_index.remove(index.BUILTIN_NAMESPACE, stale)
    return result, len(stale)


def search(
    ctx: Context,
    query: str,
    *,
    limit: int = 10,
    domain: str | None = None,
    memories_too: bool = True,
) -> list[dict[str, Any]]:
    allowed = {c.name: c for c in visible_to(ctx) if domain is None or c.domain == domain}
    [vector] = embed([query])
    metadata = {"kind": "builtin", **({"domain": domain} if domain else {})}
    matches = index.query_builtin(vector, top_k=max(limit * 3, 30), metadata=metadata)
    scores = {m.vector_id: m.score for m in matches if m.vector_id in allowed}
    words = memories.terms(query)
    for name in allowed:
        if name.lower() in words or name.lower() == query.strip().lower():
            scores[name] = scores.get(name, 0.0) + NAME_MATCH_BONUS
    results = [
        Result(score, _capability_json(allowed[name], score)) for name, score in scores.items()
    ]
    if domain in (None, "meta"):
        for hit in memories.rank(ctx.user_id, query, limit=limit):
            results.append(Result(hit.score, _memory_json(hit)))
    for kind in vector_kinds.searchable(domain):
        results += _owned(kind, ctx.user_id, vector, limit)
    results.sort(key=lambda r: -r.score)
    return [r.body for r in results[:limit]]


def _owned(kind: vector_kinds.Kind, user_id: str, vector: list[float], limit: int) -> list[Result]:
    hits = vector_kinds.nearest_owned(
        kind, user_id, vector, limit=limit, min_score=memories.MIN_SEMANTIC_SCORE
    )
    results = []
    for row, score in hits:
        weighted = memories.SEMANTIC_WEIGHT * score
        body = kind.hit(row, weighted) if kind.hit else None
        if body is not None:
            results.append(Result(weighted, body))
    return results


def _capability_json(cap: Capability, score: float) -> dict[str, Any]:
    return {
        "type": "capability",
        "name": cap.name,
        "domain": cap.domain,
        "title": cap.title,
        "description": cap.description,
        "inputSchema": dict(cap.input_schema),
        "score": round(score, 4),
    }


def _memory_json(hit: memories.Hit) -> dict[str, Any]:
    return {
        "type": "memory",
        "id": hit.memory.id,
        "subject": hit.memory.subject,
        "summary": hit.memory.summary,
        "score": round(hit.score, 4),
    }
