"""Public community catalog: listings, ratings, stars, forks, reports, bans, follows.

Rows that hang off a listing keep a plain ``listing_id`` (no FK): account deletion removes
rows on the user's own listings explicitly, and fork provenance must outlive the listing.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kody.fields import created_at, stable_user_id, text_id, updated_at


class ListingStatus(models.TextChoices):
    ACTIVE = "active"
    DELISTED = "delisted"


class ListingCategory(models.TextChoices):
    INTEGRATIONS = "integrations"
    EXAMPLES = "examples"
    PRODUCTIVITY = "productivity"
    APPS = "apps"
    UTILITIES = "utilities"
    OTHER = "other"


class CommunityListing(models.Model):
    id = text_id()
    owner_user_id = stable_user_id()
    package_id = models.CharField(max_length=64)
    source_id = models.CharField(max_length=64)
    kody_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    tags_json = models.JSONField(default=list, blank=True)
    category = models.CharField(
        max_length=16, choices=ListingCategory.choices, default=ListingCategory.OTHER
    )
    search_text = models.TextField(blank=True, default="")
    readme_content = models.TextField(blank=True, default="")
    license = models.CharField(max_length=128, blank=True, default="")
    pinned_commit = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=ListingStatus.choices, default=ListingStatus.ACTIVE
    )
    published_at = models.DateTimeField(default=timezone.now)
    trusted_commit = models.CharField(max_length=64, null=True, blank=True)
    trusted_by_user_id = stable_user_id(null=True, blank=True)
    trusted_at = models.DateTimeField(null=True, blank=True)
    featured_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "community_listings"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ListingStatus.values), name="community_listings_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(category__in=ListingCategory.values),
                name="community_listings_category_valid",
            ),
            models.UniqueConstraint(
                fields=["owner_user_id", "package_id"], name="community_listings_owner_pkg_uq"
            ),
            # Friendly URLs: one *active* listing per (owner, kody id); delisted rows may repeat.
            models.UniqueConstraint(
                fields=["owner_user_id", "kody_id"],
                condition=Q(status="active"),
                name="community_listings_active_kody_uq",
            ),
        ]
        indexes = [
            models.Index(
                fields=["status", "category", "published_at"],
                name="community_listings_browse_ix",
            ),
            models.Index(fields=["featured_at"], name="community_listings_feat_ix"),
        ]

    def __str__(self) -> str:
        return self.kody_id


class CommunityRating(models.Model):
    id = text_id()
    listing_id = models.CharField(max_length=64)
    user_id = stable_user_id(db_index=True)
    stars = models.PositiveSmallIntegerField()
    adaptation_effort = models.PositiveSmallIntegerField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "community_ratings"
        constraints = [
            models.CheckConstraint(
                condition=Q(stars__gte=1, stars__lte=5), name="community_ratings_stars_range"
            ),
            models.CheckConstraint(
                condition=Q(adaptation_effort__isnull=True)
                | Q(adaptation_effort__gte=1, adaptation_effort__lte=5),
                name="community_ratings_effort_range",
            ),
            models.UniqueConstraint(
                fields=["listing_id", "user_id"], name="community_ratings_listing_user_uq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.listing_id}:{self.stars}"


class ReportStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class CommunityReport(models.Model):
    id = text_id()
    listing_id = models.CharField(max_length=64, db_index=True)
    # Snapshot so the report stays intelligible after the listing is gone.
    listing_name = models.CharField(max_length=255, blank=True, default="")
    listing_owner_user_id = stable_user_id(db_index=True)
    reporter_user_id = stable_user_id(db_index=True)
    reason = models.TextField()
    status = models.CharField(
        max_length=16,
        choices=ReportStatus.choices,
        default=ReportStatus.OPEN,
    )
    resolved_by_user_id = stable_user_id(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_note = models.TextField(blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "community_reports"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReportStatus.values), name="community_reports_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="community_reports_status_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.listing_name or self.listing_id}:{self.status}"


class CommunityBan(models.Model):
    user_id = stable_user_id(primary_key=True)
    banned_by_user_id = stable_user_id()
    reason = models.TextField(blank=True, default="")
    created_at = created_at()

    class Meta:
        db_table = "community_bans"

    def __str__(self) -> str:
        return self.user_id


class CommunityStar(models.Model):
    """Original PK(listing_id, user_id); surrogate id + UNIQUE here (admin)."""

    listing_id = models.CharField(max_length=64)
    user_id = stable_user_id(db_index=True)
    created_at = created_at()

    class Meta:
        db_table = "community_stars"
        constraints = [
            models.UniqueConstraint(fields=["listing_id", "user_id"], name="community_stars_pk_uq"),
        ]

    def __str__(self) -> str:
        return f"{self.listing_id}:{self.user_id[:12]}"


class ActivityEventType(models.TextChoices):
    LISTING_PUBLISHED = "listing_published"
    LISTING_UPDATED = "listing_updated"


class CommunityActivityEvent(models.Model):
    id = text_id()
    actor_user_id = stable_user_id()
    event_type = models.CharField(max_length=32, choices=ActivityEventType.choices)
    listing_id = models.CharField(max_length=64, db_index=True)
    created_at = created_at()

    class Meta:
        db_table = "community_activity_events"
        constraints = [
            models.CheckConstraint(
                condition=Q(event_type__in=ActivityEventType.values),
                name="community_activity_events_type_valid",
            ),
        ]
        indexes = [
            models.Index(
                fields=["actor_user_id", "created_at"],
                name="community_activity_actor_ix",
            ),
            models.Index(fields=["created_at"], name="community_activity_created_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type}:{self.listing_id}"


class ForkActor(models.TextChoices):
    HUMAN = "human"
    AGENT = "agent"


class CommunityFork(models.Model):
    id = text_id()
    listing_id = models.CharField(max_length=64, db_index=True)
    forker_user_id = stable_user_id()
    origin_commit = models.CharField(max_length=64)
    # No FK: inert forks keep an entity source but no saved package.
    forked_package_id = models.CharField(max_length=64)
    forked_source_id = models.CharField(max_length=64)
    target_kody_id = models.CharField(max_length=255)
    listing_name = models.CharField(max_length=255, blank=True, default="")
    listing_kody_id = models.CharField(max_length=255, blank=True, default="")
    adopted_at = models.DateTimeField(null=True, blank=True)
    adoption_note = models.TextField(null=True, blank=True)
    actor = models.CharField(max_length=8, choices=ForkActor.choices, default=ForkActor.HUMAN)
    created_at = created_at()

    class Meta:
        db_table = "community_forks"
        constraints = [
            models.CheckConstraint(
                condition=Q(actor__in=ForkActor.values), name="community_forks_actor_valid"
            ),
        ]
        indexes = [
            models.Index(
                fields=["forked_package_id", "forker_user_id"],
                name="community_forks_pkg_ix",
            ),
            models.Index(fields=["forker_user_id", "created_at"], name="community_forks_forker_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.listing_kody_id}→{self.target_kody_id}"


class UserFollow(models.Model):
    """Original PK(follower_user_id, followee_user_id); surrogate id + UNIQUE here (admin)."""

    follower_user_id = stable_user_id()
    followee_user_id = stable_user_id(db_index=True)
    created_at = created_at()

    class Meta:
        db_table = "user_follows"
        constraints = [
            models.UniqueConstraint(
                fields=["follower_user_id", "followee_user_id"], name="user_follows_pk_uq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.follower_user_id[:12]}→{self.followee_user_id[:12]}"
