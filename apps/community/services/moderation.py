"""Reports, bans, trust and featuring: what moderators do, each leaving an audit event.

Operators act through admin capabilities and the Django admin; both call these functions so
the audit trail and the recorded moderator are the same either way.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.services import audit
from apps.community.models import (
    CommunityBan,
    CommunityFork,
    CommunityListing,
    CommunityRating,
    CommunityReport,
    ReportStatus,
)
from apps.community.services import reads
from apps.community.services.listings import ListingNotFound
from apps.packages.services.repos import decode_cursor, encode_cursor
from kody.errors import InvalidInput, NotFound, RateLimited

REPORTS_PER_HOUR = 10
REPORT_WINDOW = timedelta(hours=1)


def _audit(action: str, moderator_id: str, what: str) -> None:
    # The moderator is named by a short id prefix: enough to find them, no email in the log.
    audit.record(
        category="admin", action=action, result="success", reason=f"by={moderator_id[:12]} {what}"
    )


def report(user_id: str, listing_id: str, reason: str) -> dict[str, Any]:
    listing = reads.find(None, listing_id)
    reason = reason.strip()
    if not reason:
        raise InvalidInput("Say what is wrong with the listing.", details={"field": "reason"})
    with transaction.atomic():
        # Count and insert under a per-reporter advisory lock, so concurrent reports from one
        # person cannot all slip under the limit.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"report:{user_id}"])
        recent = CommunityReport.objects.filter(
            reporter_user_id=user_id, created_at__gte=timezone.now() - REPORT_WINDOW
        )
        if recent.count() >= REPORTS_PER_HOUR:
            raise RateLimited(
                f"At most {REPORTS_PER_HOUR} reports an hour; try again later.",
                code="report_rate_limited",
            )
        row = CommunityReport.objects.create(
            listing_id=listing.id,
            listing_name=listing.name,
            listing_owner_user_id=listing.owner_user_id,
            reporter_user_id=user_id,
            reason=reason,
        )
    return {"report": {"id": row.id, "listingId": listing.id, "status": row.status}}


def triage(report_id: str, moderator_id: str, status: str, note: str = "") -> CommunityReport:
    if status not in (ReportStatus.RESOLVED, ReportStatus.DISMISSED):
        raise InvalidInput("A report is resolved or dismissed.", details={"status": status})
    with transaction.atomic():
        row = CommunityReport.objects.select_for_update().filter(id=report_id).first()
        if row is None:
            raise NotFound("No report with that id.", code="report_not_found")
        row.status = status
        row.resolved_by_user_id = moderator_id
        row.resolved_at = timezone.now()
        row.resolution_note = note
        row.save()
    _audit(f"community_report_{status}", moderator_id, f"report={row.id} listing={row.listing_id}")
    return row


def ban(user_id: str, moderator_id: str, reason: str = "") -> CommunityBan:
    row, _ = CommunityBan.objects.update_or_create(
        user_id=user_id, defaults={"banned_by_user_id": moderator_id, "reason": reason}
    )
    _audit("community_ban", moderator_id, f"banned={user_id[:12]}")
    return row


def unban(user_id: str, moderator_id: str) -> None:
    CommunityBan.objects.filter(user_id=user_id).delete()
    _audit("community_unban", moderator_id, f"unbanned={user_id[:12]}")


def set_trusted(listing_id: str, commit: str | None, moderator_id: str) -> dict[str, Any]:
    with transaction.atomic():
        row = CommunityListing.objects.select_for_update().filter(id=listing_id).first()
        if row is None:
            raise ListingNotFound(details={"listingId": listing_id})
        if commit is not None and commit != row.pinned_commit:
            raise InvalidInput(
                "Only the listing's pinned commit can be trusted.",
                code="commit_not_pinned",
                details={"pinnedCommit": row.pinned_commit},
            )
        row.trusted_commit = commit
        row.trusted_by_user_id = moderator_id if commit else None
        row.trusted_at = timezone.now() if commit else None
        row.save(update_fields=["trusted_commit", "trusted_by_user_id", "trusted_at", "updated_at"])
    _audit("community_set_trusted", moderator_id, f"listing={listing_id} commit={commit}")
    return {
        "listing": {
            "id": row.id,
            "trustedCommit": row.trusted_commit,
            "trustedAt": row.trusted_at.isoformat() if row.trusted_at else None,
        }
    }


def set_featured(listing_id: str, featured: bool, moderator_id: str) -> dict[str, Any]:
    row = CommunityListing.objects.filter(id=listing_id).first()
    if row is None:
        raise ListingNotFound(details={"listingId": listing_id})
    row.featured_at = (row.featured_at or timezone.now()) if featured else None
    row.save(update_fields=["featured_at", "updated_at"])
    _audit("community_set_featured", moderator_id, f"listing={listing_id} featured={featured}")
    return {"listing": {"id": row.id, "featured": row.featured_at is not None}}


def activity(limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    """Forks and ratings, newest first, as public listing identity plus the actor's username:
    no fork source, no snapshot, no rating note, no email, no stable id."""
    limit = max(1, min(limit, 100))
    after = decode_cursor(cursor, 1)
    since = after[0] if after else None
    forks = CommunityFork.objects.order_by("-created_at")
    ratings = CommunityRating.objects.order_by("-created_at")
    if since:
        forks, ratings = forks.filter(created_at__lt=since), ratings.filter(created_at__lt=since)
    rows: list[tuple[Any, str, str, str, int | None]] = [
        (f.created_at, "fork", f.listing_id, f.forker_user_id, None)
        for f in forks.only("created_at", "listing_id", "forker_user_id")[: limit + 1]
    ]
    rows += [
        (r.created_at, "rating", r.listing_id, r.user_id, r.stars)
        for r in ratings.only("created_at", "listing_id", "user_id", "stars")[: limit + 1]
    ]
    rows.sort(key=lambda x: x[0], reverse=True)
    more, page = len(rows) > limit, rows[:limit]
    listings = {
        x.id: x
        for x in CommunityListing.objects.filter(id__in={r[2] for r in page}).only(
            "id", "kody_id", "name"
        )
    }
    forks_by_id = {
        f.listing_id: f
        for f in CommunityFork.objects.filter(
            Q(listing_id__in={r[2] for r in page}) & ~Q(listing_id__in=list(listings))
        ).only("listing_id", "listing_name", "listing_kody_id")
    }
    names = reads.usernames({r[3] for r in page})
    events = []
    for created, kind, listing_id, actor, stars in page:
        listing = listings.get(listing_id)
        snap = forks_by_id.get(listing_id)
        event = {
            "type": kind,
            "listingId": listing_id,
            "listingKodyId": listing.kody_id if listing else (snap.listing_kody_id if snap else ""),
            "listingName": listing.name if listing else (snap.listing_name if snap else ""),
            "actor": names.get(actor, ""),
            "createdAt": created.isoformat(),
        }
        if stars is not None:
            event["stars"] = stars
        events.append(event)
    return {
        "events": events,
        "nextCursor": encode_cursor(page[-1][0].isoformat()) if more and page else None,
    }
