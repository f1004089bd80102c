"""Operator admin for identity and platform configuration.

Credential columns (password hash, token hashes, TOTP secrets, passkey keys, ciphertexts, lease
tokens) are never rendered: each admin excludes them from its form, detail and list views.
Tables whose truth is written elsewhere (the audit trail, ledgers, token tables) are view-only.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.core.exceptions import ValidationError
from django.db import models
from django.http import HttpRequest
from django.urls import URLPattern, URLResolver, path
from django.utils import timezone

from apps.accounts import models as m
from apps.accounts.admin_reserved import reserved_usernames_view, serve_at_site_root
from apps.accounts.models.users import normalize_email, stable_user_id_for
from apps.accounts.services import flags, identity
from kody import console
from kody.adminkit import ReadOnlyModelAdmin
from kody.errors import KodyError

# --- sign-in --------------------------------------------------------------------------------


class AdminLoginForm(AdminAuthenticationForm):
    """``/admin/login/`` signs in through the same check as ``/login``: one failure budget per
    account and per IP, suspension refused, every attempt audited."""

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            ip = self.request.META.get("REMOTE_ADDR") if self.request else None
            path = self.request.path if self.request else "/admin/login/"
            try:
                self.user_cache = identity.authenticate_login(username, password, ip=ip, path=path)
            except KodyError as exc:
                raise ValidationError(exc.message, code=exc.code) from None
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


admin.site.login_form = AdminLoginForm

# --- users ----------------------------------------------------------------------------------


class UserChangeForm(forms.ModelForm):
    class Meta:
        model = m.User
        # The admin chooses what to show through fieldsets; the form only must never carry the hash.
        exclude = ("password",)  # noqa: DJ006


_STAMPS = (
    "first_mcp_connected_at",
    "first_execute_at",
    "first_search_at",
    "first_saved_package_at",
    "first_secret_at",
    "first_integration_at",
    "first_job_at",
    "mcp_client_name",
    "last_active_at",
)
_ATTRIBUTION = (
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "first_touch_landing_path",
    "first_touch_referrer",
)


serve_at_site_root()  # /admin/reserved-usernames/, the address operators are given


@admin.register(m.User)
class UserAdmin(DjangoUserAdmin):
    form = UserChangeForm
    change_list_template = "admin/accounts/user/change_list.html"

    def get_urls(self) -> list[URLPattern | URLResolver]:
        view = self.admin_site.admin_view(reserved_usernames_view)
        return [
            path("reserved-usernames/", view, name="accounts_reserved_usernames"),
            *super().get_urls(),
        ]

    list_display = ("username", "email", "plan", "account_type", "is_staff", "created_at")
    list_filter = ("plan", "account_type", "is_staff", "is_superuser", "is_active")
    search_fields = ("username", "email", "stable_user_id")
    ordering = ("-created_at",)
    readonly_fields = (
        "stable_user_id",
        "created_at",
        "updated_at",
        "last_login",
        "password_changed_at",
        "deleting_at",
        "active_write_count",
        "active_write_expires_at",
        "second_agent_standard_gift_granted_at",
        *_ATTRIBUTION,
        *_STAMPS,
    )
    fieldsets = (
        (None, {"fields": ("username", "email", "stable_user_id", "account_type")}),
        ("Profile", {"fields": ("display_name", "bio", "profile_visibility", "avatar_key")}),
        (
            "Plan and billing",
            {
                "fields": (
                    "plan",
                    "stripe_customer_id",
                    "stripe_plan",
                    "stripe_plan_refreshed_at",
                    "second_agent_standard_gift_granted_at",
                    "second_agent_standard_gift_expires_at",
                    "referral_standard_credit_expires_at",
                )
            },
        ),
        (
            "Status",
            {
                "fields": (
                    "is_active",
                    "email_verified_at",
                    "verification_email_status",
                    "verification_email_status_at",
                    "verification_email_error",
                    "suspended_at",
                    "email_outbound_paused_at",
                    "deleting_at",
                    "active_write_count",
                    "active_write_expires_at",
                    "experiments_opt_in",
                )
            },
        ),
        (
            "Job retention (days; empty = platform default)",
            {
                "fields": (
                    "job_retention_success_once_days",
                    "job_retention_failed_once_days",
                    "job_retention_disabled_recurring_days",
                )
            },
        ),
        ("Attribution", {"classes": ("collapse",), "fields": _ATTRIBUTION}),
        ("Activation", {"classes": ("collapse",), "fields": _STAMPS}),
        ("Permissions", {"fields": ("is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("last_login", "created_at", "updated_at", "password_changed_at")}),
    )
    add_fieldsets = (
        (
            None,
            {
                "classes": ("wide",),
                "fields": ("username", "email", "usable_password", "password1", "password2"),
            },
        ),
    )

    def save_model(self, request: HttpRequest, obj: m.User, form: Any, change: bool) -> None:
        if not obj.stable_user_id:
            # Same identity minting as signup; later email changes never remint it.
            obj.email = normalize_email(obj.email)
            obj.stable_user_id = stable_user_id_for(obj.email)
        super().save_model(request, obj, form, change)


# --- identity -------------------------------------------------------------------------------


@admin.register(m.UserEmailClaim)
class UserEmailClaimAdmin(admin.ModelAdmin):
    list_display = ("email", "user", "status", "claimed_at", "released_at")
    list_filter = ("status",)
    search_fields = ("email",)
    raw_id_fields = ("user",)
    readonly_fields = ("created_at", "updated_at")


class TokenAdmin(ReadOnlyModelAdmin):
    allow_delete = True  # deleting a row revokes the link
    exclude = ("token_hash",)
    list_display = ("user", "expires_at", "created_at")
    raw_id_fields = ("user",)


@admin.register(m.PasswordReset)
class PasswordResetAdmin(TokenAdmin):
    pass


@admin.register(m.EmailVerification)
class EmailVerificationAdmin(TokenAdmin):
    pass


@admin.register(m.PendingEmailChange)
class PendingEmailChangeAdmin(TokenAdmin):
    list_display = ("user", "new_email", "expires_at", "created_at")


@admin.register(m.PendingEmailClaimRelease)
class PendingEmailClaimReleaseAdmin(TokenAdmin):
    list_display = ("user", "email", "expires_at", "created_at")


@admin.register(m.Verification)
class VerificationAdmin(ReadOnlyModelAdmin):
    allow_delete = True  # resets a user's second factor
    exclude = ("secret",)
    list_display = ("type", "target", "expires_at", "created_at")
    search_fields = ("target",)


@admin.register(m.Passkey)
class PasskeyAdmin(ReadOnlyModelAdmin):
    allow_delete = True
    exclude = ("public_key",)
    list_display = ("name", "user", "device_type", "backed_up", "last_used_at", "created_at")
    raw_id_fields = ("user",)


@admin.register(m.OAuthConnection)
class OAuthConnectionAdmin(ReadOnlyModelAdmin):
    allow_delete = True
    list_display = ("provider_name", "provider_display_name", "user", "created_at")
    list_filter = ("provider_name",)


@admin.register(m.Invite)
class InviteAdmin(admin.ModelAdmin):
    list_display = ("code", "plan", "use_count", "max_uses", "expires_at", "revoked_at")
    list_filter = ("plan",)
    search_fields = ("code", "note")
    raw_id_fields = ("created_by",)


@admin.register(m.UsernameRedirect)
class UsernameRedirectAdmin(ReadOnlyModelAdmin):
    allow_delete = True
    list_display = ("old_username", "user_id", "created_at")
    search_fields = ("old_username", "user_id")


@admin.register(m.AccountWriteLeaseRepair)
class AccountWriteLeaseRepairAdmin(ReadOnlyModelAdmin):
    exclude = ("lease_token",)
    list_display = ("target_user_id", "repaired_by_user_id", "lease_holder", "created_at")
    search_fields = ("target_user_id",)


@admin.register(m.AccountDeletion)
class AccountDeletionAdmin(ReadOnlyModelAdmin):
    """Deletion jobs: which step, how many attempts, counts per step, the last error."""

    list_display = ("id", "status", "step", "attempts", "requested_by", "created_at")
    list_filter = ("status", "step", "requested_by")
    search_fields = ("subject_user_id",)


@admin.register(m.McpAgentSession)
class McpAgentSessionAdmin(ReadOnlyModelAdmin):
    list_display = ("do_id", "user_id", "created_at")
    search_fields = ("user_id",)


@admin.register(m.OAuthGrant)
class OAuthGrantAdmin(ReadOnlyModelAdmin):
    """People's OAuth connections (no secrets here; tokens are checksums in the toolkit's
    tables). Revoking is the person's, or deleting the client: docs/runbooks/oauth.md."""

    list_display = (
        "client_name",
        "client_id",
        "user",
        "first_used_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = ("remember",)
    search_fields = ("client_id", "client_name", "user__username")


@admin.register(m.AuditEvent)
class AuditEventAdmin(ReadOnlyModelAdmin):
    list_display = ("timestamp", "category", "action", "result", "path")
    list_filter = ("category", "result")
    search_fields = ("action", "email_hash")
    date_hierarchy = "timestamp"


# --- flags and platform config --------------------------------------------------------------


@admin.register(m.FeatureFlag)
class FeatureFlagAdmin(admin.ModelAdmin):
    list_display = ("key", "enabled", "rollout_percent", "exposures_this_month", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("key", "note")
    raw_id_fields = ("updated_by",)
    readonly_fields = ("exposures_this_month",)

    @admin.display(description="Exposures this month (on / off, people on / off)")
    def exposures_this_month(self, obj: m.FeatureFlag) -> str:
        if obj.pk is None:
            return "-"
        r = flags.readout(obj.key)
        return (
            f"{r['exposures']} ({r['exposuresOn']} on / {r['exposuresOff']} off; "
            f"{r['peopleOn']} / {r['peopleOff']} people)"
        )


@admin.register(m.FeatureFlagUserOverride)
class FeatureFlagUserOverrideAdmin(admin.ModelAdmin):
    list_display = ("flag_key", "user", "enabled", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("flag_key",)
    raw_id_fields = ("user", "updated_by")


@admin.register(m.FeatureFlagExposureRollup)
class FeatureFlagExposureRollupAdmin(ReadOnlyModelAdmin):
    list_display = ("flag_key", "day", "enabled", "source", "exposure_count")
    list_filter = ("enabled", "source")


@admin.register(m.PlatformOAuthApp)
class PlatformOAuthAppAdmin(admin.ModelAdmin):
    # The client secret is set through the platform-app service, which encrypts it.
    exclude = ("client_secret_encrypted",)
    list_display = ("slug", "provider", "label", "flow", "enabled")
    list_filter = ("enabled", "flow")
    readonly_fields = ("created_at", "updated_at")


@admin.register(m.SiteBanner)
class SiteBannerAdmin(admin.ModelAdmin):
    list_display = ("title", "enabled", "priority", "severity", "audience", "starts_at", "ends_at")
    list_filter = ("enabled", "severity", "audience")
    raw_id_fields = ("created_by", "updated_by")
    readonly_fields = ("created_at", "updated_at")


@admin.register(m.SiteBannerDismissal)
class SiteBannerDismissalAdmin(ReadOnlyModelAdmin):
    allow_delete = True
    list_display = ("banner", "user", "dismissed_at")


@admin.register(m.PlatformProviderMark)
class PlatformProviderMarkAdmin(admin.ModelAdmin):
    list_display = ("slug", "label", "logo_content_type", "updated_at")
    search_fields = ("slug", "label")
    readonly_fields = ("created_at", "updated_at")


@admin.register(m.PlatformFeedback)
class PlatformFeedbackAdmin(admin.ModelAdmin):
    list_display = ("summary", "category", "status", "submitter_username", "created_at")
    list_filter = ("status", "category")
    search_fields = ("summary", "submitter_username")
    fields = (
        "summary",
        "details",
        "category",
        "submitter_username",
        "submitter_email",
        "submitter_user_id",
        "status",
        "admin_note",
        "reviewed_by_user_id",
        "reviewed_at",
        "revision",
        "created_at",
        "updated_at",
    )
    readonly_fields = (
        "summary",
        "details",
        "category",
        "submitter_username",
        "submitter_email",
        "submitter_user_id",
        "reviewed_by_user_id",
        "reviewed_at",
        "revision",
        "created_at",
        "updated_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # feedback is only ever submitted by its author

    def save_model(
        self, request: HttpRequest, obj: m.PlatformFeedback, form: Any, change: bool
    ) -> None:
        now = timezone.now()
        obj.reviewed_by_user_id = getattr(request.user, "stable_user_id", None)
        obj.reviewed_at = now
        obj.updated_at = now
        obj.revision = models.F("revision") + 1
        super().save_model(request, obj, form, change)
        obj.refresh_from_db(fields=["revision"])


# --- lifecycle mail and referrals -----------------------------------------------------------


@admin.register(m.UserUsageCampaign)
class UserUsageCampaignAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "state", "send_count", "ever_activated", "last_evaluated_at")
    list_filter = ("state", "ever_activated", "cooling_terminal")
    search_fields = ("user_id",)


@admin.register(m.UserUsageCampaignSend)
class UserUsageCampaignSendAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "state", "template", "send_index", "sent_at")
    list_filter = ("state", "template")
    search_fields = ("user_id",)


@admin.register(m.UserTipsEmailOptOut)
class UserTipsEmailOptOutAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "opted_out_at")
    search_fields = ("user_id",)


@admin.register(m.Referral)
class ReferralAdmin(ReadOnlyModelAdmin):
    list_display = ("referrer_stable_user_id", "referee_stable_user_id", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("referrer_stable_user_id", "referee_stable_user_id", "reward_invoice_id")


# --- counts on the operator console (kody/console.py) ---------------------------------------

# A running deletion untouched this long has lost its worker; retained ones wait for a retry.
STUCK_DELETION_AFTER = timedelta(hours=1)


def _stuck_deletions() -> int:
    stale = timezone.now() - STUCK_DELETION_AFTER
    return m.AccountDeletion.objects.filter(
        models.Q(status=m.DeletionStatus.RETAINED)
        | models.Q(status=m.DeletionStatus.RUNNING, updated_at__lt=stale)
    ).count()


console.register_attention(
    "stuck_deletions",
    "Stuck account deletions",
    "accounts.accountdeletion",
    _stuck_deletions,
    query="status__exact=retained",
)
console.register_attention(
    "open_feedback",
    "Open platform feedback",
    "accounts.platformfeedback",
    lambda: m.PlatformFeedback.objects.filter(status=m.FeedbackStatus.OPEN).count(),
    query="status__exact=open",
)
