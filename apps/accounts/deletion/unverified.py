"""The hourly ``unverified_account_purge``: password signups never verified in seven days.

Eligible: ``email_verified_at`` is null, created more than ``UNVERIFIED_DAYS`` ago, no
``oauth_connections`` row, a person account, and never claimed before (``deleting_at`` null;
a failed deletion is carried on by the ``account_deletion_resume`` lane with its backoff).
Each row is claimed by a conditional UPDATE that re-checks eligibility, so a person who
verifies at the last moment is never deleted, and verification refuses a claimed account.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from apps.accounts.models import DeletionStatus, OAuthConnection, User

UNVERIFIED_DAYS = 7
_EMAIL = re.compile(r"[^\s@<>\"']+@[^\s@<>\"']+")


@dataclass(frozen=True)
class Outcome:
    user_id: str
    outcome: str  # purged | failed | would_purge | skipped
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"userId": self.user_id, "outcome": self.outcome, "reason": self.reason}


def eligible() -> QuerySet[User]:
    cutoff = timezone.now() - timedelta(days=UNVERIFIED_DAYS)
    social = OAuthConnection.objects.filter(user=OuterRef("pk"))
    return (
        User.objects.filter(
            email_verified_at__isnull=True,
            created_at__lt=cutoff,
            deleting_at__isnull=True,
            account_type="person",
        )
        .exclude(Exists(social))
        .order_by("created_at", "pk")
    )


def claim(user: User) -> bool:
    """Stamp the fence only while the account is still eligible (one conditional UPDATE)."""
    return eligible().filter(pk=user.pk).update(deleting_at=timezone.now()) == 1


def run_pass(*, limit: int, dry_run: bool = False) -> list[Outcome]:
    from apps.accounts.deletion import job
    from apps.accounts.services import audit

    outcomes = []
    for user in list(eligible()[:limit]):
        if dry_run:
            outcomes.append(Outcome(user.stable_user_id, "would_purge"))
            continue
        if not claim(user):
            outcomes.append(Outcome(user.stable_user_id, "skipped", "no longer eligible"))
            continue
        try:
            deletion = job.run(job.start(user, requested_by="lane"))
        except job.DeletionInProgress:
            outcomes.append(Outcome(user.stable_user_id, "skipped", "deletion already running"))
            continue
        if deletion.status == DeletionStatus.COMPLETE:
            _audit(audit, user.email, "unverified_account_purged", "success", None)
            outcomes.append(Outcome(user.stable_user_id, "purged"))
        else:
            reason = redact(deletion.last_error)
            _audit(audit, user.email, "unverified_account_purge_failed", "failure", reason)
            outcomes.append(Outcome(user.stable_user_id, "failed", reason))
    return outcomes


def redact(text: str) -> str:
    return _EMAIL.sub("[email]", text or "")[:200]


def _audit(audit: Any, email: str, action: str, result: str, reason: str | None) -> None:
    try:
        audit.record(category="account", action=action, result=result, email=email, reason=reason)
    except Exception:  # noqa: BLE001 - the audit sink is best-effort here (seed 000)
        import logging

        logging.getLogger(__name__).warning("audit unavailable for %s", action)
