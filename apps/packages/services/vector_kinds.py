"""Which rows have a vector, what it says, and keeping one kind in step with its rows.

The contracts of seed 000 ("Vectorize metadata contracts"); every user-owned vector lives in
the owner's namespace (their stable user id):

| kind | vector id | metadata | source rows |
| --- | --- | --- | --- |
| memory | ``memory_{id}`` | ``{kind, userId, status, category?}`` | ``mcp_memories`` (live) |
| job | ``job_{id}`` or ``job_sha256:…`` | ``{kind, userId}`` | ``jobs`` |
| package | ``package_{id}`` or ``package_sha256:…`` | ``{kind, userId}`` | ``saved_packages`` |

Changing what a kind embeds or its metadata means bumping
``search_index.FINGERPRINT_VERSION`` and running ``manage.py reindex``.

Each kind registers itself with ``register`` from the app that owns its rows: memories and
packages here, jobs from ``apps.jobs.vectors`` (jobs is built on this app, so this module
never imports it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import models

from apps.accounts.models import User
from apps.packages.models import McpMemory, SavedPackage
from apps.packages.models.mcp import MemoryStatus
from apps.packages.services import search_index
from apps.packages.services.search_index import Doc, SyncResult
from kody.vectors import index
from kody.vectors.ids import parse, vector_id


@dataclass(frozen=True)
class Kind:
    name: str  # the metadata kind, the vector id prefix, ``reindex --kind``
    model: type[models.Model]  # rows with ``id`` and ``user_id``
    doc: Callable[[Any], Doc | None]  # None: this row should have no vector
    # The builtin ``search``'s domain for this kind's hits (None: not searched as a kind),
    # and a hit's JSON from its row and weighted score (None: the row stays out of search).
    search_domain: str | None = None
    hit: Callable[[Any, float], dict[str, Any] | None] | None = None

    def vector_id(self, source_id: str) -> str:
        return vector_id(self.name, source_id)

    def rows(self, user_id: str | None = None) -> models.QuerySet[Any]:
        rows = self.model.objects.all()
        return rows.filter(user_id=user_id) if user_id else rows


def doc_text(*parts: str) -> str:
    """A doc's text: its non-empty parts, one a line."""
    return "\n".join(p for p in parts if p)


def memory_doc(memory: McpMemory) -> Doc | None:
    if memory.status == MemoryStatus.DELETED:
        return None
    metadata: dict[str, Any] = {"kind": "memory", "userId": memory.user_id, "status": memory.status}
    if memory.category:
        metadata["category"] = memory.category
    text = doc_text(memory.subject, memory.summary, memory.details, " ".join(memory.tags_json))
    return Doc(memory.user_id, vector_id("memory", memory.id), text, metadata)


def package_doc(package: SavedPackage) -> Doc:
    text = doc_text(
        package.name,
        package.kody_id,
        package.description,
        " ".join(str(t) for t in package.tags_json),
        package.search_text,
    )
    metadata = {"kind": "package", "userId": package.user_id}
    return Doc(package.user_id, vector_id("package", package.id), text, metadata)


def package_hit(package: SavedPackage, score: float) -> dict[str, Any] | None:
    if package.hidden:
        return None  # hidden packages stay out of ranked search (seed 000)
    return {
        "type": "package",
        "id": package.id,
        "name": package.name,
        "kodyId": package.kody_id,
        "description": package.description,
        "score": round(score, 4),
    }


# name -> kind, in the order they registered.
KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


def searchable(domain: str | None) -> list[Kind]:
    """The kinds the builtin ``search`` ranks as owned rows (all of them when ``domain`` is
    None, else the one with that domain)."""
    return [
        kind
        for kind in KINDS.values()
        if kind.search_domain and domain in (None, kind.search_domain)
    ]


register(Kind("memory", McpMemory, memory_doc))
register(Kind("package", SavedPackage, package_doc, "packages", package_hit))


def index_rows(kind: Kind, rows: Sequence[Any], *, force: bool = False) -> SyncResult:
    """Upsert the vectors of rows that want one; remove those of rows that do not."""
    docs: list[Doc] = []
    unwanted: dict[str, list[str]] = defaultdict(list)
    leaving = deleting_owners({row.user_id for row in rows})
    for row in rows:
        doc = kind.doc(row)
        if row.user_id in leaving:
            continue  # the deletion job has removed (or will remove) this owner's vectors
        if doc is None:
            unwanted[row.user_id].append(kind.vector_id(row.id))
        else:
            docs.append(doc)
    result = search_index.sync(docs, force=force)
    for namespace, ids in unwanted.items():
        result.removed += search_index.remove(namespace, ids)
    return result


def deleting_owners(user_ids: Iterable[str]) -> set[str]:
    """Owners whose account deletion has begun: no vector may be written for them again, or
    one written after the deletion's vector step would outlive the account."""
    ids = set(user_ids)
    if not ids:
        return set()
    rows = User.objects.filter(stable_user_id__in=ids, deleting_at__isnull=False)
    return set(rows.values_list("stable_user_id", flat=True))


def index_sources(
    kind: Kind, user_id: str, source_ids: Iterable[str], *, force: bool = False
) -> SyncResult:
    """Re-read the owner's rows by id and bring their vectors in step; an id with no row (or
    another user's) loses the vector it may have had in this owner's namespace."""
    wanted = set(source_ids)
    rows = list(kind.model.objects.filter(user_id=user_id, id__in=wanted))
    result = index_rows(kind, rows, force=force)
    missing = wanted - {row.id for row in rows}
    if missing:
        result.removed += search_index.remove(user_id, [kind.vector_id(i) for i in missing])
    return result


def forget(kind: Kind, owned: Iterable[tuple[str, str]]) -> int:
    """Remove the vectors of (user_id, source_id) rows that were deleted."""
    by_owner: dict[str, list[str]] = defaultdict(list)
    for user_id, source_id in owned:
        by_owner[user_id].append(kind.vector_id(source_id))
    return sum(search_index.remove(ns, ids) for ns, ids in by_owner.items())


def live_vector_ids(kind: Kind, page: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (namespace, vector id) pairs of ``kind`` still have an owner's row that wants a
    vector. Passthrough ids are looked up directly; a digest id cannot be reversed, so its
    owner's ids are all hashed (jobs and packages per user are few)."""
    live: set[tuple[str, str]] = set()
    direct = {parse(kind.name, vid) for _, vid in page} - {None}
    for row in kind.model.objects.filter(id__in=direct):
        if kind.doc(row) is not None:
            live.add((row.user_id, kind.vector_id(row.id)))
    hashed = {ns for ns, vid in page if parse(kind.name, vid) is None}
    for row in kind.model.objects.filter(user_id__in=hashed):
        if kind.doc(row) is not None:
            live.add((row.user_id, kind.vector_id(row.id)))
    return live & set(page)


def owned_rows(kind: Kind, user_id: str, vector_ids: Iterable[str]) -> dict[str, Any]:
    """The owner's rows behind these vector ids, by vector id (search re-reads every hit)."""
    ids = list(vector_ids)
    direct = {parse(kind.name, vid) for vid in ids} - {None}
    rows = kind.model.objects.filter(user_id=user_id)
    if len(direct) == len(ids):
        rows = rows.filter(id__in=direct)
    found = {kind.vector_id(row.id): row for row in rows}
    return {vid: found[vid] for vid in ids if vid in found}


def nearest_owned(
    kind: Kind, user_id: str, embedding: Sequence[float], *, limit: int, min_score: float
) -> list[tuple[Any, float]]:
    """The owner's rows of ``kind`` nearest to ``embedding``: the query filters on namespace,
    owner column and ``userId``, and each hit is re-read from its table by owner."""
    metadata = {"kind": kind.name, "userId": user_id}
    matches = [
        m
        for m in index.query(user_id, embedding, top_k=limit, metadata=metadata)
        if m.score >= min_score
    ]
    rows = owned_rows(kind, user_id, [m.vector_id for m in matches])
    return [(rows[m.vector_id], m.score) for m in matches if m.vector_id in rows]
