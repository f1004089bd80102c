"""Bring-your-own OAuth apps, OAuth connections, OpenAPI bindings and remote connectors.

An OAuth app's client secret and a connection's access/refresh tokens are user secrets
(``secret_entries``, sealed with AES-GCM); these rows hold only their names. The remote
connector's shared secret is still inline. No credential is exported or shown in admin.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.fields import (
    created_at,
    json_dict,
    json_list,
    stable_user_id,
    text_id,
    updated_at,
)


class OauthFlow(models.TextChoices):
    PKCE = "pkce"
    CONFIDENTIAL = "confidential"


class UserOauthApp(models.Model):
    """Original PK(user_id, slug); surrogate id + UNIQUE here (admin).

    The UNIQUE(user_id, slug) is also the target of user_integrations' composite FK.
    """

    user_id = stable_user_id()
    slug = models.CharField(max_length=128)
    provider = models.CharField(max_length=128)
    label = models.CharField(max_length=255, blank=True, default="")
    client_id = models.TextField()
    # The user secret holding the client secret; empty for a public (PKCE-only) client.
    client_secret_secret_name = models.CharField(max_length=255, blank=True, default="")
    token_url = models.TextField()
    authorize_url = models.TextField()
    api_base_url = models.TextField(blank=True, default="")
    flow = models.CharField(max_length=16, choices=OauthFlow.choices, default=OauthFlow.PKCE)
    use_pkce = models.BooleanField(default=True)
    token_exchange_style = models.CharField(max_length=32, blank=True, default="")
    scope_separator = models.CharField(max_length=8, default=" ")
    extra_authorize_params_json = json_dict()
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "user_oauth_apps"
        verbose_name = "user OAuth app"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "slug"], name="user_oauth_apps_pk_uq"),
        ]
        indexes = [
            models.Index(fields=["user_id", "provider"], name="user_oauth_apps_provider_ix"),
        ]

    def __str__(self) -> str:
        return self.slug


class UserIntegration(models.Model):
    """Original PK(user_id, name); surrogate id + UNIQUE here (admin).

    Exactly one of ``app_slug`` (composite FK (user_id, app_slug) → user_oauth_apps) and
    ``platform_app_slug`` (FK → platform_oauth_apps.slug) is set. Both FKs are ON DELETE
    RESTRICT in the database and are declared in migration 0002: Django cannot express the
    composite one, and its own FK constraints are deferred NO ACTION rather than RESTRICT.
    """

    user_id = stable_user_id()
    name = models.CharField(max_length=255)
    app_slug = models.CharField(max_length=128, null=True, blank=True)
    # The FK constraint (ON DELETE RESTRICT, not deferred) is declared in migration 0002.
    platform_app = models.ForeignKey(
        "accounts.PlatformOAuthApp",
        on_delete=models.RESTRICT,
        to_field="slug",
        db_column="platform_app_slug",
        db_constraint=False,
        null=True,
        blank=True,
        related_name="user_integrations",
    )
    account_label = models.CharField(max_length=255, blank=True, default="")
    description = models.TextField(blank=True, default="")
    scopes_json = json_list()
    required_hosts_json = json_list()
    usage_mode = models.CharField(max_length=32, blank=True, default="")
    allowed_packages_json = json_list()
    # User secrets holding the tokens; empty until the authorization completes.
    access_token_secret_name = models.CharField(max_length=255, blank=True, default="")
    refresh_token_secret_name = models.CharField(max_length=255, blank=True, default="")
    connected_at = models.DateTimeField(null=True, blank=True)
    token_refreshed_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "user_integrations"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "name"], name="user_integrations_pk_uq"),
            models.CheckConstraint(
                condition=(Q(app_slug__isnull=False) & Q(platform_app__isnull=True))
                | (Q(app_slug__isnull=True) & Q(platform_app__isnull=False)),
                name="user_integrations_one_app",
            ),
        ]
        indexes = [
            models.Index(fields=["user_id", "app_slug"], name="user_integrations_app_ix"),
        ]

    def __str__(self) -> str:
        return self.name


class UserOpenapiBinding(models.Model):
    """Original PK(user_id, name); surrogate id + UNIQUE here (admin)."""

    user_id = stable_user_id()
    name = models.CharField(max_length=255)
    spec_url = models.TextField()
    api_base_url = models.TextField(blank=True, default="")
    # True when the person gave apiBaseUrl: a refresh then keeps it rather than taking the
    # spec's (possibly new) server URL.
    api_base_url_explicit = models.BooleanField(default=False)
    description = models.TextField(blank=True, default="")
    # Auth *shape* (scheme, secret placeholder names) — never a credential value.
    auth_json = json_dict()
    selection_json = json_dict()
    include_destructive = models.BooleanField(default=False)
    spec_title = models.CharField(max_length=255, blank=True, default="")
    spec_version = models.CharField(max_length=64, blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "user_openapi_bindings"
        verbose_name = "user OpenAPI binding"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "name"], name="user_openapi_bindings_pk_uq"),
        ]

    def __str__(self) -> str:
        return self.name


class UserOpenapiBindingOperation(models.Model):
    """Original PK(user_id, binding_name, slug); surrogate id + UNIQUE here (admin).

    The composite FK (user_id, binding_name) → user_openapi_bindings ON DELETE CASCADE is
    declared in migration 0002.
    """

    user_id = stable_user_id()
    binding_name = models.CharField(max_length=255)
    slug = models.CharField(max_length=255)
    operation_json = json_dict()
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "user_openapi_binding_operations"
        verbose_name = "user OpenAPI binding operation"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "binding_name", "slug"], name="user_openapi_binding_ops_pk_uq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.binding_name}:{self.slug}"


class RemoteConnectorSetting(models.Model):
    id = text_id()
    user_id = stable_user_id()
    instance_id = models.CharField(max_length=255)
    enabled = models.BooleanField(default=True)
    attached = models.BooleanField(default=False)
    encrypted_shared_secret = models.TextField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "remote_connector_settings"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "instance_id"], name="remote_connector_settings_uq"
            ),
        ]

    def __str__(self) -> str:
        return self.instance_id


class IntegrationProvider(models.Model):
    """The curated registry of known OAuth providers (operator-edited, no user_id).

    ``integrationRegistrySearch`` / ``integrationDiscover`` read it to prefill a bring-your-own
    app: endpoints, flow options, default scopes and the API hosts a token is sent to.
    ``mark_slug`` names a ``platform_provider_marks`` row for its logo; ``aliases_json`` holds
    other names and authorize/API hosts that identify the provider.
    """

    slug = models.CharField(max_length=64, primary_key=True)
    label = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    authorize_url = models.CharField(max_length=2048)
    token_url = models.CharField(max_length=2048)
    api_base_url = models.CharField(max_length=2048, blank=True, default="")
    flow = models.CharField(max_length=16, choices=OauthFlow.choices, default=OauthFlow.PKCE)
    token_exchange_style = models.CharField(max_length=32, blank=True, default="")
    scope_separator = models.CharField(max_length=8, default=" ")
    extra_authorize_params_json = json_dict()
    default_scopes_json = json_list()
    required_hosts_json = json_list()
    aliases_json = json_list()
    docs_url = models.CharField(max_length=2048, blank=True, default="")
    mark_slug = models.CharField(max_length=64, blank=True, default="")
    enabled = models.BooleanField(default=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "integration_providers"
        constraints = [
            models.CheckConstraint(
                condition=Q(flow__in=OauthFlow.values), name="integration_providers_flow"
            ),
        ]

    def __str__(self) -> str:
        return self.slug
