"""Operator admin for the community catalog and its moderation tables."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.community import models as m
from apps.community.services import listings, moderation
from kody import console
from kody.adminkit import ReadOnlyModelAdmin


@admin.register(m.CommunityListing)
class CommunityListingAdmin(admin.ModelAdmin):
    list_display = ("kody_id", "name", "owner_user_id", "category", "status", "published_at")
    list_filter = ("status", "category")
    search_fields = ("kody_id", "name", "owner_user_id", "package_id")
    date_hierarchy = "published_at"

    # A hard delete also removes the snapshot, icons, vector and the rows others left on it.
    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        listings.hard_delete(obj.id)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for row in queryset:
            listings.hard_delete(row.id)


@admin.register(m.CommunityRating)
class CommunityRatingAdmin(admin.ModelAdmin):
    # Rating notes are the rater's content: kept out of the list view.
    list_display = ("listing_id", "user_id", "stars", "adaptation_effort", "updated_at")
    list_filter = ("stars",)
    search_fields = ("listing_id", "user_id")


@admin.register(m.CommunityReport)
class CommunityReportAdmin(admin.ModelAdmin):
    """Triage: an open report becomes resolved or dismissed with a note; the moderator and the
    time are recorded and an audit event written (apps.community.services.moderation)."""

    list_display = ("listing_name", "listing_id", "reporter_user_id", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("listing_id", "listing_name", "reporter_user_id", "listing_owner_user_id")
    actions = ("resolve", "dismiss")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [
            f.name
            for f in self.model._meta.concrete_fields
            if f.name not in ("status", "resolution_note")
        ]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if obj.status == m.ReportStatus.OPEN:
            super().save_model(request, obj, form, change)
            return
        moderation.triage(obj.id, request.user.stable_user_id, obj.status, obj.resolution_note)

    def _triage(self, request: HttpRequest, queryset: Any, status: str) -> None:
        for row in queryset.filter(status=m.ReportStatus.OPEN):
            moderation.triage(row.id, request.user.stable_user_id, status)

    @admin.action(description="Resolve selected reports")
    def resolve(self, request: HttpRequest, queryset: Any) -> None:
        self._triage(request, queryset, m.ReportStatus.RESOLVED)

    @admin.action(description="Dismiss selected reports")
    def dismiss(self, request: HttpRequest, queryset: Any) -> None:
        self._triage(request, queryset, m.ReportStatus.DISMISSED)


@admin.register(m.CommunityBan)
class CommunityBanAdmin(admin.ModelAdmin):
    """Banning hides the user's listings and stops them publishing; the banning operator is the
    one signed in, never typed."""

    list_display = ("user_id", "banned_by_user_id", "created_at")
    search_fields = ("user_id",)
    readonly_fields = ("banned_by_user_id", "created_at")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        moderation.ban(obj.user_id, request.user.stable_user_id, obj.reason)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        moderation.unban(obj.user_id, request.user.stable_user_id)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for row in queryset:
            moderation.unban(row.user_id, request.user.stable_user_id)


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
