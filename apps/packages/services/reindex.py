"""Rebuilding vectors from their source rows (``manage.py reindex``).

Each kind is swept in keyset batches; after every committed batch the position is saved in KV
(``reindex-cursor:v1:{kind}:{scope}``), so a killed run continues with ``--resume`` instead of
starting over. Unchanged fingerprints are skipped unless ``force``; a finished sweep then
deletes vectors whose source row is gone (orphans), settles the kind's search-index debt
(each debt row tried once per run) and clears its cursor. Kinds: the user-owned ones of
``vector_kinds.KINDS`` (memory, job, package) and the builtin ``capability``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction

from apps.packages.services import index_debt, search_index
from apps.packages.services.search import index_capabilities
from apps.packages.services.vector_kinds import KINDS, Kind, index_rows, live_vector_ids
from kody.kv import store
from kody.vectors import index

CHOICES = (*KINDS, "capability")
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


def total(kind: str, opts: Options) -> int | None:
    return KINDS[kind].rows(opts.user_id).count() if kind in KINDS else None


def reindex_rows(kind_name: str, opts: Options, summary: Summary, progress: Progress) -> None:
    """One user-owned kind: keyset batches by id, the orphan sweep, then the kind's debt."""
    kind = KINDS[kind_name]
    key = cursor_key(kind_name, opts.user_id)
    saved = store.get_json(key) if opts.resume else None
    after: str | None = saved["after"] if saved else None
    if not opts.resume:
        store.delete(key)
    while True:
        rows = kind.rows(opts.user_id).order_by("id")
        if after is not None:
            rows = rows.filter(id__gt=after)
        batch = list(rows[: opts.batch_size])
        if not batch:
            break
        with transaction.atomic():
            result = index_rows(kind, batch, force=opts.force)
            after = batch[-1].id
            store.put_json(key, {"after": after}, ttl=CURSOR_TTL)
        summary.scanned += len(batch)
        summary.embedded += result.embedded
        summary.skipped += result.skipped
        summary.deleted_orphans += result.removed
        progress(len(batch))
        if opts.throttle:
            time.sleep(opts.throttle)
    summary.deleted_orphans += _sweep_orphans(kind, opts)
    _drain_debt(kind_name, opts, summary)
    store.delete(key)


def _sweep_orphans(kind: Kind, opts: Options) -> int:
    """Vectors of the kind whose row is gone, does not want one, or is someone else's."""
    deleted = 0
    after = None
    while page := index.ids_after(opts.user_id, kind.name, after, 1000):
        after = page[-1]
        live = live_vector_ids(kind, page)
        orphans: dict[str, list[str]] = {}
        for namespace, vid in page:
            if (namespace, vid) not in live:
                orphans.setdefault(namespace, []).append(vid)
        for namespace, vids in orphans.items():
            deleted += search_index.remove(namespace, vids)
    return deleted


def _drain_debt(kind: str, opts: Options, summary: Summary) -> None:
    """Writes left pending (deferred or failed) are settled now, each tried once per run."""
    after = 0
    while True:
        report = index_debt.drain(
            limit=opts.batch_size, user_id=opts.user_id, kinds=[kind], due_only=False, after=after
        )
        if not report.handled:
            return
        summary.embedded += report.embedded
        after = report.last_id


def reindex_capabilities(opts: Options, summary: Summary, progress: Progress) -> None:
    result, stale = index_capabilities(force=opts.force)
    done = result.embedded + result.skipped
    summary.scanned += done
    summary.embedded += result.embedded
    summary.skipped += result.skipped
    summary.deleted_orphans += stale
    progress(done)
