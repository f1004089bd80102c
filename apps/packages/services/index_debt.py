"""Keeping vectors in step with writes, inline or after the response.

Design note. A write calls ``changed(kind, user_id, ids)`` inside its own transaction, after
changing the rows. Inline (the default while the embedder is fast) the vectors are written
in a savepoint of that transaction; if embedding fails, the savepoint rolls back, the write
still commits and the ids are recorded as debt instead. Deferred (``KODY_EMBED_MODE=deferred``,
or ``auto`` once the embedder's measured latency passes the budget) the write only records
debt. A debt row is the durable promise: it commits with the write, a best-effort task kicked
after COMMIT drains it, and the ``search_index_debt`` lane (every tick) and ``manage.py
reindex`` drain whatever is left. Draining re-reads the rows, so it always writes the latest
state, and a row deleted meanwhile loses its vector. A failed drain keeps the debt with
``attempts``, ``last_error`` (a class name) and a backed-off ``available_at``.

Concurrency: the drain locks the debt rows it takes (``SKIP LOCKED``) and reads the source
rows after that; a write that lands meanwhile upserts the same debt row, waits for the lock
and so leaves debt behind for the next drain. Nothing is lost, at worst embedded twice.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.packages.models import SearchIndexDebt
from apps.packages.services import search_index
from apps.packages.services.vector_kinds import KINDS, index_sources

log = logging.getLogger(__name__)

DRAIN_BATCH = 200
RETRY_BASE = timedelta(seconds=30)
RETRY_MAX = timedelta(hours=6)


@dataclass
class Drained:
    indexed: int = 0  # debt rows settled
    failed: int = 0  # debt rows kept for a retry
    embedded: int = 0  # vectors written
    last_id: int = 0  # the highest debt id taken (reindex pages by it)

    @property
    def handled(self) -> int:
        return self.indexed + self.failed


def deferred() -> bool:
    mode = settings.KODY_EMBED_MODE
    if mode == "auto":
        return search_index.speed.slow()
    return mode == "deferred"


def changed(kind: str, user_id: str, source_ids: Sequence[str]) -> None:
    """Call inside the write's transaction once its rows are changed (or deleted)."""
    if kind not in KINDS:
        raise ValueError(f"unknown vector kind {kind!r}")
    ids = sorted(set(source_ids))
    if not ids:
        return
    if deferred():
        record(kind, user_id, ids)
        return
    try:
        with transaction.atomic():
            index_sources(KINDS[kind], user_id, ids)
    except Exception as exc:  # the write stands; its vector is owed
        log.warning("vector write failed kind=%s (%s); recorded as debt", kind, type(exc).__name__)
        record(kind, user_id, ids, error=exc)


def record(
    kind: str, user_id: str, source_ids: Sequence[str], *, error: Exception | None = None
) -> None:
    now = timezone.now()
    SearchIndexDebt.objects.bulk_create(
        [
            SearchIndexDebt(
                kind=kind,
                user_id=user_id,
                source_id=source_id,
                attempts=1 if error else 0,
                last_error=type(error).__name__ if error else "",
                available_at=now + retry_delay(1) if error else now,
            )
            for source_id in source_ids
        ],
        update_conflicts=True,
        unique_fields=["kind", "user_id", "source_id"],
        update_fields=["attempts", "last_error", "available_at", "updated_at"],
    )
    if error is None:
        transaction.on_commit(lambda: _kick(user_id))


def _kick(user_id: str) -> None:
    """Drain soon, on the default queue. Best effort: the debt row and the lane are the
    guarantee, as the outbox's own kick is."""
    try:
        from apps.packages.tasks import drain_search_index_debt  # tasks import this module

        drain_search_index_debt.apply_async(kwargs={"user_id": user_id})
    except Exception as exc:
        log.warning("search index drain kick not sent (%s); the lane drains", type(exc).__name__)


def retry_delay(attempts: int) -> timedelta:
    return min(RETRY_MAX, RETRY_BASE * 2 ** max(0, attempts - 1))


def drain(
    *,
    limit: int = DRAIN_BATCH,
    user_id: str | None = None,
    kinds: Sequence[str] | None = None,
    due_only: bool = True,
    after: int = 0,
) -> Drained:
    """Settle up to ``limit`` debt rows, oldest first (by id after ``after`` when not
    ``due_only``, as reindex pages through everything once)."""
    report = Drained()
    now = timezone.now()
    with transaction.atomic():
        rows = SearchIndexDebt.objects.select_for_update(skip_locked=True).filter(id__gt=after)
        if due_only:
            rows = rows.filter(available_at__lte=now)
        if user_id is not None:
            rows = rows.filter(user_id=user_id)
        if kinds is not None:
            rows = rows.filter(kind__in=list(kinds))
        # An account being deleted keeps its debt untouched: its rows go in the deletion's
        # database step, and a released deletion drains it then.
        rows = rows.exclude(
            user_id__in=User.objects.filter(deleting_at__isnull=False).values("stable_user_id")
        )
        taken = list(rows.order_by("id")[:limit])
        groups: dict[tuple[str, str], list[SearchIndexDebt]] = defaultdict(list)
        for debt in taken:
            groups[(debt.kind, debt.user_id)].append(debt)
            report.last_id = max(report.last_id, debt.id)
        for (kind, owner), debts in groups.items():
            _settle(kind, owner, debts, report)
    return report


def _settle(kind: str, owner: str, debts: list[SearchIndexDebt], report: Drained) -> None:
    try:
        with transaction.atomic():
            result = index_sources(KINDS[kind], owner, [d.source_id for d in debts])
    except Exception as exc:
        report.failed += len(debts)
        log.warning(
            "search index debt kind=%s rows=%d failed (%s); retrying later",
            kind,
            len(debts),
            type(exc).__name__,
        )
        now = timezone.now()
        for debt in debts:
            debt.attempts += 1
            debt.last_error = type(exc).__name__
            debt.available_at = now + retry_delay(debt.attempts)
            debt.updated_at = now
        SearchIndexDebt.objects.bulk_update(
            debts, ["attempts", "last_error", "available_at", "updated_at"]
        )
        return
    SearchIndexDebt.objects.filter(pk__in=[d.pk for d in debts]).delete()
    report.indexed += len(debts)
    report.embedded += result.embedded


def pending(user_id: str | None = None) -> int:
    rows = SearchIndexDebt.objects.all()
    return (rows.filter(user_id=user_id) if user_id else rows).count()
