"""The ``repo_session_cleanup`` sweep: owners whose hint says a session is due, a page at a
time. Each owner's own index decides what is due (idle 30 minutes unused, 7 days after the
last edit, discarded, or published and settled) and removes it, blobs before rows; the hint
row follows the index. A failing owner is pushed back and does not block the next."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from apps.packages.actor.index import RepoSessionIndex
from apps.packages.models import RepoSessionDueOwner

log = logging.getLogger(__name__)

RETRY_AFTER = timedelta(minutes=5)


@dataclass
class Pass:
    visited: int = 0
    removed: int = 0
    failed: int = 0
    owners: list[str] = field(default_factory=list)


def cleanup_due(batch: int) -> Pass:
    now = timezone.now()
    done = Pass()
    due = list(
        RepoSessionDueOwner.objects.filter(due_at__lte=now)
        .order_by("due_at", "user_id")
        .values_list("user_id", flat=True)[:batch]
    )
    for user_id in due:
        done.visited += 1
        try:
            answer = RepoSessionIndex.call(user_id, "cleanup_due", now=now.isoformat())
        except Exception as exc:  # noqa: BLE001 - one owner's failure waits for a later tick
            log.warning("repo session cleanup for an owner failed: %s", type(exc).__name__)
            RepoSessionDueOwner.objects.filter(user_id=user_id).update(due_at=now + RETRY_AFTER)
            done.failed += 1
            continue
        done.removed += len(answer["removed"])
    return done
