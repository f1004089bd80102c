"""Rebuilding vectors from their source rows (``manage.py reindex``).

Each kind is swept in keyset batches; after every committed batch the position is saved in KV
(``reindex-cursor:v1:{kind}:{scope}``), so a killed run continues with ``--resume`` instead of
starting over. Unchanged fingerprints are skipped unless ``force``; a finished sweep then
deletes vectors whose source row is gone (orphans) and clears its cursor.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction

from apps.packages.models import McpMemory
from apps.packages.models.mcp import MemoryStatus
from apps.packages.services import search_index
from apps.packages.services.search import index_capabilities
from kody.kv import store
from kody.vectors import index

KINDS = ("memory", "capability")
# A cursor names no user (its scope is hashed) and expires, so deletion need not find it.
CURSOR_TTL = timedelta(days=7)
Progress = Callable[[int], None]


@dataclass
class Summary:
    scanned: int = 0
    embedded: int = 0
    skipped: int = 0
    deleted_orphans: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        seconds = time.monotonic() - self.started
        return (
            f"reindex scanned={self.scanned} embedded={self.embedded} skipped={self.skipped} "
            f"deleted_orphans={self.deleted_orphans} seconds={seconds:.1f}"
        )


@dataclass(frozen=True)
class Options:
    user_id: str | None = None
    force: bool = False
    resume: bool = False
    batch_size: int = 500
    throttle: float = 0.0  # seconds to pause between batches, to go easy on the database


def cursor_key(kind: str, user_id: str | None) -> str:
    # Hashed so the key names no user; it only holds a row id.
    scope = hashlib.sha256(user_id.encode()).hexdigest()[:16] if user_id else "all"
    return f"reindex-cursor:v1:{kind}:{scope}"


def memory_total(opts: Options) -> int:
    return _memories(opts).count()


def _memories(opts: Options):  # type: ignore[no-untyped-def]
    rows = McpMemory.objects.all()
    return rows.filter(user_id=opts.user_id) if opts.user_id else rows


def reindex_memories(opts: Options, summary: Summary, progress: Progress) -> None:
    key = cursor_key("memory", opts.user_id)
    saved = store.get_json(key) if opts.resume else None
    after: str | None = saved["after"] if saved else None
    if not opts.resume:
        store.delete(key)
    while True:
        rows = _memories(opts).order_by("id")
        if after is not None:
            rows = rows.filter(id__gt=after)
        batch = list(rows[: opts.batch_size])
        if not batch:
            break
        with transaction.atomic():
            result = search_index.index_memories(batch, force=opts.force)
            after = batch[-1].id
            store.put_json(key, {"after": after}, ttl=CURSOR_TTL)
        summary.scanned += len(batch)
        summary.embedded += result.embedded
        summary.skipped += result.skipped
        summary.deleted_orphans += result.removed
        progress(len(batch))
        if opts.throttle:
            time.sleep(opts.throttle)
    summary.deleted_orphans += _sweep_memory_orphans(opts)
    store.delete(key)


def _sweep_memory_orphans(opts: Options) -> int:
    """Vectors of kind memory whose row is gone, deleted, or belongs to someone else."""
    deleted = 0
    after = None
    while page := index.ids_after(opts.user_id, "memory", after, 1000):
        after = page[-1]
        live = set(
            McpMemory.objects.filter(id__in={_raw_memory_id(vid) for _, vid in page})
            .exclude(status=MemoryStatus.DELETED)
            .values_list("user_id", "id")
        )
        orphans: dict[str, list[str]] = {}
        for namespace, vid in page:
            if (namespace, _raw_memory_id(vid)) not in live:
                orphans.setdefault(namespace, []).append(vid)
        for namespace, vids in orphans.items():
            deleted += search_index.remove(namespace, vids)
    return deleted


def _raw_memory_id(vid: str) -> str:
    return vid.removeprefix(f"{search_index.MEMORY_PREFIX}_")


def reindex_capabilities(opts: Options, summary: Summary, progress: Progress) -> None:
    result, stale = index_capabilities(force=opts.force)
    done = result.embedded + result.skipped
    summary.scanned += done
    summary.embedded += result.embedded
    summary.skipped += result.skipped
    summary.deleted_orphans += stale
    progress(done)
