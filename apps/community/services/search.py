"""``communitySearch``: hybrid ranking over visible listings.

Candidates come from two places: the nearest listing vectors to the query (pgvector, the
community namespace) and a text match on name and search text. Each candidate scores its
cosine similarity plus a text bonus, plus a boost when trusted or featured; visibility
(active, owner not banned) is applied to the candidates in SQL, so a delisted or banned
listing can never rank. Pages are offsets into that ranking.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from apps.community.services.reads import card, usernames, visible
from apps.packages.services.repos import decode_cursor, encode_cursor
from kody import embeddings
from kody.errors import InvalidInput
from kody.vectors import index

VECTOR_CANDIDATES = 200
TEXT_CANDIDATES = 200
NAME_BONUS = 0.6
TEXT_BONUS = 0.3
FEATURED_BOOST = 0.2
TRUSTED_BOOST = 0.15
MAX_LIMIT = 50
MAX_OFFSET = 400


def search(
    query: str,
    *,
    category: str | None = None,
    tags: list[str] | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> dict[str, Any]:
    limit = max(1, min(limit, MAX_LIMIT))
    after = decode_cursor(cursor, 1)
    offset = int(after[0]) if after and after[0].isdigit() else 0
    if after and not after[0].isdigit():
        raise InvalidInput("That cursor is not one this list gave out.")
    offset = min(offset, MAX_OFFSET)
    rows = visible()
    if category:
        rows = rows.filter(category=category)
    for tag in tags or []:
        rows = rows.filter(tags_json__contains=[tag])
    query = query.strip()
    if not query:
        ranked = list(
            rows.order_by("-featured_at", "-published_at", "id")[offset : offset + limit + 1]
        )
        scored = [(0.0, r) for r in ranked]
    else:
        scored = _ranked(rows, query)[offset : offset + limit + 1]
    more, page = len(scored) > limit, scored[:limit]
    names = usernames({r.owner_user_id for _, r in page})
    results = [{**card(r, names.get(r.owner_user_id, "")), "score": round(s, 4)} for s, r in page]
    next_offset = offset + limit
    return {
        "results": results,
        "nextCursor": encode_cursor(str(next_offset))
        if more and next_offset <= MAX_OFFSET
        else None,
    }


def _ranked(rows: Any, query: str) -> list[tuple[float, Any]]:
    [vector] = embeddings.embed([query])
    similarity = {
        m.vector_id: m.score for m in index.query_community(vector, top_k=VECTOR_CANDIDATES)
    }
    text_ids = list(
        rows.filter(Q(name__icontains=query) | Q(search_text__icontains=query)).values_list(
            "id", flat=True
        )[:TEXT_CANDIDATES]
    )
    # Readmes can be 100 KB each; ranking never reads them.
    candidates = list(rows.filter(id__in=set(similarity) | set(text_ids)).defer("readme_content"))
    lowered = query.lower()
    scored = []
    for row in candidates:
        score = similarity.get(row.id, 0.0)
        if lowered in row.name.lower():
            score += NAME_BONUS
        elif lowered in row.search_text.lower():
            score += TEXT_BONUS
        if row.featured_at is not None:
            score += FEATURED_BOOST
        if row.trusted_commit:
            score += TRUSTED_BOOST
        scored.append((score, row))
    scored.sort(key=lambda pair: (-pair[0], pair[1].id))
    return scored
