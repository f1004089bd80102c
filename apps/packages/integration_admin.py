"""Operator admin for OAuth integrations: platform apps (with a write-only client secret and
a logo upload), provider marks (logo upload) and the curated provider registry.

The platform-app and provider-mark models belong to accounts, whose admin cannot reach the
packages services that seal secrets and fit images: their admin is re-registered here.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from apps.accounts.models import PlatformOAuthApp, PlatformProviderMark
from apps.packages.models import IntegrationProvider
from apps.packages.services.integrations import platform_apps

MAX_UPLOAD = platform_apps.MAX_LOGO_BYTES


class PlatformOAuthAppForm(forms.ModelForm):
    client_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: leave empty to keep the current secret.",
    )
    logo_upload = forms.ImageField(required=False, help_text="PNG, JPEG or WebP; fitted to 256 px.")

    class Meta:
        model = PlatformOAuthApp
        fields = (
            "slug",
            "provider",
            "label",
            "description",
            "enabled",
            "client_id",
            "authorize_url",
            "token_url",
            "api_base_url",
            "flow",
            "use_pkce",
            "token_exchange_style",
            "scope_separator",
            "extra_authorize_params_json",
            "allowed_scopes_json",
            "default_scopes_json",
            "required_hosts_json",
        )


class PlatformProviderMarkForm(forms.ModelForm):
    logo_upload = forms.ImageField(required=False, help_text="PNG, JPEG or WebP; fitted to 256 px.")

    class Meta:
        model = PlatformProviderMark
        fields = ("slug", "label", "aliases_json")


def _upload(form: forms.ModelForm, prefix: str) -> str | None:
    upload = form.cleaned_data.get("logo_upload")
    if not upload:
        return None
    return platform_apps.store_image(prefix, upload.read(MAX_UPLOAD + 1))


for model in (PlatformOAuthApp, PlatformProviderMark):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


@admin.register(PlatformOAuthApp)
class PlatformOAuthAppAdmin(admin.ModelAdmin):
    form = PlatformOAuthAppForm
    list_display = ("slug", "provider", "label", "flow", "enabled")
    list_filter = ("enabled", "flow")
    search_fields = ("slug", "provider", "label")
    readonly_fields = ("created_at", "updated_at")

    def save_model(
        self, request: HttpRequest, obj: PlatformOAuthApp, form: Any, change: bool
    ) -> None:
        secret = form.cleaned_data.get("client_secret")
        if secret:
            obj.client_secret_encrypted = platform_apps.seal_secret(obj.slug, secret)
        key = _upload(form, platform_apps.logo_prefix(obj.slug))
        if key:
            obj.logo_key, obj.logo_content_type = key, "image/webp"
        super().save_model(request, obj, form, change)


@admin.register(PlatformProviderMark)
class PlatformProviderMarkAdmin(admin.ModelAdmin):
    form = PlatformProviderMarkForm
    list_display = ("slug", "label", "logo_content_type", "updated_at")
    search_fields = ("slug", "label")
    readonly_fields = ("created_at", "updated_at")

    def save_model(
        self, request: HttpRequest, obj: PlatformProviderMark, form: Any, change: bool
    ) -> None:
        key = _upload(form, platform_apps.mark_prefix(obj.slug))
        if key:
            obj.logo_key, obj.logo_content_type = key, "image/webp"
        super().save_model(request, obj, form, change)


@admin.register(IntegrationProvider)
class IntegrationProviderAdmin(admin.ModelAdmin):
    list_display = ("slug", "label", "flow", "enabled", "updated_at")
    list_filter = ("enabled", "flow")
    search_fields = ("slug", "label", "description")
    readonly_fields = ("created_at", "updated_at")
