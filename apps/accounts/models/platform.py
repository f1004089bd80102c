"""Operator-owned platform configuration: built-in OAuth apps, banners and provider marks."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from kody.fields import text_id

# Foreign keys use db_constraint=False: migration 0002 declares them in the database with the
# original ON DELETE action, so raw deletes (account deletion's batch) behave like ORM ones.


class OAuthFlow(models.TextChoices):
    PKCE = "pkce"
    CONFIDENTIAL = "confidential"


class TokenExchangeStyle(models.TextChoices):
    FORM = "form"
    BASIC_JSON = "basic-json"
    BASIC_FORM = "basic-form"


class PlatformOAuthApp(models.Model):
    """Built-in OAuth registrations that existing connections still refresh against."""

    slug = models.CharField(max_length=64, primary_key=True)
    provider = models.CharField(max_length=64)
    label = models.CharField(max_length=255, null=True, blank=True)
    client_id = models.CharField(max_length=512)
    # The one credential ciphertext kept outside the secret store; only the platform-app
    # service decrypts it.
    client_secret_encrypted = models.TextField(null=True, blank=True)
    token_url = models.CharField(max_length=2048)
    authorize_url = models.CharField(max_length=2048)
    api_base_url = models.CharField(max_length=2048, null=True, blank=True)
    flow = models.CharField(max_length=16, choices=OAuthFlow.choices)
    use_pkce = models.BooleanField(null=True, blank=True)
    token_exchange_style = models.CharField(
        max_length=16, choices=TokenExchangeStyle.choices, null=True, blank=True
    )
    scope_separator = models.CharField(max_length=8, null=True, blank=True)
    extra_authorize_params_json = models.JSONField(default=dict, blank=True)
    allowed_scopes_json = models.JSONField(default=list, blank=True)
    default_scopes_json = models.JSONField(default=list, blank=True)
    required_hosts_json = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    logo_key = models.CharField(max_length=512, null=True, blank=True)
    logo_content_type = models.CharField(max_length=128, null=True, blank=True)
    description = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "platform_oauth_apps"
        constraints = [
            models.CheckConstraint(
                condition=Q(flow__in=OAuthFlow.values), name="platform_oauth_apps_flow"
            ),
            models.CheckConstraint(
                condition=Q(token_exchange_style__isnull=True)
                | Q(token_exchange_style__in=TokenExchangeStyle.values),
                name="platform_oauth_apps_exchange",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class BannerSeverity(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    SUCCESS = "success"
    PROMO = "promo"


class BannerLook(models.TextChoices):
    STRIP = "strip"
    PROMO = "promo"
    CARD = "card"


class BannerPageTargeting(models.TextChoices):
    ALL = "all"
    ROUTES = "routes"


class BannerAudience(models.TextChoices):
    EVERYONE = "everyone"
    LOGGED_OUT = "logged_out"
    LOGGED_IN = "logged_in"
    USERS = "users"
    PLANS = "plans"


class SiteBanner(models.Model):
    id = text_id()
    enabled = models.BooleanField(default=False)
    priority = models.IntegerField(default=0)
    title = models.CharField(max_length=255)
    body = models.TextField(blank=True, default="")
    cta_href = models.CharField(max_length=2048, null=True, blank=True)
    cta_label = models.CharField(max_length=255, null=True, blank=True)
    secondary_href = models.CharField(max_length=2048, null=True, blank=True)
    secondary_label = models.CharField(max_length=255, null=True, blank=True)
    severity = models.CharField(
        max_length=16, choices=BannerSeverity.choices, default=BannerSeverity.INFO
    )
    look = models.CharField(max_length=16, choices=BannerLook.choices, default=BannerLook.STRIP)
    icon = models.CharField(max_length=64, null=True, blank=True)
    image_url = models.CharField(max_length=2048, null=True, blank=True)
    page_targeting = models.CharField(
        max_length=16, choices=BannerPageTargeting.choices, default=BannerPageTargeting.ALL
    )
    route_patterns = models.JSONField(default=list, blank=True)
    audience = models.CharField(
        max_length=16, choices=BannerAudience.choices, default=BannerAudience.EVERYONE
    )
    audience_user_ids = models.JSONField(default=list, blank=True)
    audience_plans = models.JSONField(default=list, blank=True)
    dismissible = models.BooleanField(default=True)
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="created_by",
        db_constraint=False,
        related_name="+",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="updated_by",
        db_constraint=False,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "site_banners"
        indexes = [
            models.Index(fields=["enabled", "-priority"], name="site_banners_enabled_prio_ix"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=0, priority__lte=1000), name="site_banners_priority"
            ),
            models.CheckConstraint(
                condition=Q(severity__in=BannerSeverity.values), name="site_banners_severity"
            ),
            models.CheckConstraint(
                condition=Q(look__in=BannerLook.values), name="site_banners_look"
            ),
            models.CheckConstraint(
                condition=Q(page_targeting__in=BannerPageTargeting.values),
                name="site_banners_page_targeting",
            ),
            models.CheckConstraint(
                condition=Q(audience__in=BannerAudience.values), name="site_banners_audience"
            ),
        ]

    def __str__(self) -> str:
        return self.title


class SiteBannerDismissal(models.Model):
    # Surrogate id in place of the original PRIMARY KEY (banner_id, user_id): admin-editable.
    banner = models.ForeignKey(
        SiteBanner,
        on_delete=models.CASCADE,
        db_column="banner_id",
        db_constraint=False,
        related_name="dismissals",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        db_column="user_id",
        db_constraint=False,
        related_name="banner_dismissals",
    )
    dismissed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "site_banner_dismissals"
        constraints = [
            models.UniqueConstraint(fields=["banner", "user"], name="site_banner_dismissal_key"),
        ]

    def __str__(self) -> str:
        return f"{self.banner_id} dismissed by {self.user_id}"


class PlatformProviderMark(models.Model):
    """Operator-uploaded brand marks for saved integrations, matched by slug or alias."""

    slug = models.CharField(max_length=64, primary_key=True)
    label = models.CharField(max_length=255)
    aliases_json = models.JSONField(default=list, blank=True)
    logo_key = models.CharField(max_length=512, null=True, blank=True)
    logo_content_type = models.CharField(max_length=128, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "platform_provider_marks"

    def __str__(self) -> str:
        return self.slug
