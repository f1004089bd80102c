"""Operator admin for the community catalog and its moderation tables."""

from __future__ import annotations

from django.contrib import admin

from apps.community import models as m
from kody import console
from kody.adminkit import ReadOnlyModelAdmin


@admin.register(m.CommunityListing)
class CommunityListingAdmin(admin.ModelAdmin):
    list_display = ("kody_id", "name", "owner_user_id", "category", "status", "published_at")
    list_filter = ("status", "category")
    search_fields = ("kody_id", "name", "owner_user_id", "package_id")
    date_hierarchy = "published_at"


@admin.register(m.CommunityRating)
class CommunityRatingAdmin(admin.ModelAdmin):
    # Rating notes are the rater's content: kept out of the list view.
    list_display = ("listing_id", "user_id", "stars", "adaptation_effort", "updated_at")
    list_filter = ("stars",)
    search_fields = ("listing_id", "user_id")


@admin.register(m.CommunityReport)
class CommunityReportAdmin(admin.ModelAdmin):
    list_display = ("listing_name", "listing_id", "reporter_user_id", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("listing_id", "listing_name", "reporter_user_id", "listing_owner_user_id")


@admin.register(m.CommunityBan)
class CommunityBanAdmin(admin.ModelAdmin):
    list_display = ("user_id", "banned_by_user_id", "created_at")
    search_fields = ("user_id",)


@admin.register(m.CommunityStar)
class CommunityStarAdmin(ReadOnlyModelAdmin):
    list_display = ("listing_id", "user_id", "created_at")
    search_fields = ("listing_id", "user_id")


@admin.register(m.CommunityActivityEvent)
class CommunityActivityEventAdmin(ReadOnlyModelAdmin):
    list_display = ("event_type", "listing_id", "actor_user_id", "created_at")
    list_filter = ("event_type",)
    search_fields = ("listing_id", "actor_user_id")


@admin.register(m.CommunityFork)
class CommunityForkAdmin(ReadOnlyModelAdmin):
    list_display = ("listing_kody_id", "target_kody_id", "forker_user_id", "actor", "adopted_at")
    list_filter = ("actor",)
    search_fields = ("listing_id", "forker_user_id", "forked_package_id")


@admin.register(m.UserFollow)
class UserFollowAdmin(ReadOnlyModelAdmin):
    list_display = ("follower_user_id", "followee_user_id", "created_at")
    search_fields = ("follower_user_id", "followee_user_id")


console.register_attention(
    "open_reports",
    "Open community reports",
    "community.communityreport",
    lambda: m.CommunityReport.objects.filter(status=m.ReportStatus.OPEN).count(),
    query="status__exact=open",
)
