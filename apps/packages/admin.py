"""Operator admin for the packages tables.

Credential columns (ciphertexts, token/lookup/URL-secret hashes) are excluded from every
form and list. Thin indexes of state that is authoritative elsewhere are read-only.
"""

from __future__ import annotations

from django.contrib import admin

from apps.packages import models as m
from kody.adminkit import NoAddModelAdmin, ReadOnlyModelAdmin

# --- MCP and memories --------------------------------------------------------------------


@admin.register(m.McpUserServerInstructions)
class McpUserServerInstructionsAdmin(admin.ModelAdmin):
    list_display = ("user_id", "updated_at")
    search_fields = ("user_id",)


@admin.register(m.McpServerSetting)
class McpServerSettingAdmin(admin.ModelAdmin):
    list_display = ("name", "user_id", "url", "enabled", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("user_id", "name", "url")


@admin.register(m.McpMemory)
class McpMemoryAdmin(admin.ModelAdmin):
    list_display = ("subject", "user_id", "category", "status", "updated_at")
    list_filter = ("status",)
    search_fields = ("user_id", "id", "dedupe_key")


@admin.register(m.McpMemoryConversationSuppression)
class McpMemoryConversationSuppressionAdmin(admin.ModelAdmin):
    list_display = ("conversation_id", "memory_id", "user_id", "last_seen_at", "expires_at")
    search_fields = ("user_id", "conversation_id", "memory__id")
    raw_id_fields = ("memory",)


# --- values and secrets ------------------------------------------------------------------


@admin.register(m.ValueBucket)
class ValueBucketAdmin(admin.ModelAdmin):
    list_display = ("id", "user_id", "scope", "binding_key", "expires_at")
    list_filter = ("scope",)
    search_fields = ("user_id", "binding_key")


@admin.register(m.ValueEntry)
class ValueEntryAdmin(admin.ModelAdmin):
    list_display = ("name", "bucket_id", "updated_at")
    search_fields = ("name", "bucket__user_id")
    raw_id_fields = ("bucket",)


@admin.register(m.SecretBucket)
class SecretBucketAdmin(admin.ModelAdmin):
    list_display = ("id", "user_id", "scope", "binding_key", "expires_at")
    list_filter = ("scope",)
    search_fields = ("user_id", "binding_key")


@admin.register(m.SecretEntry)
class SecretEntryAdmin(NoAddModelAdmin):
    exclude = ("encrypted_value", "lookup_hash")
    list_display = ("name", "bucket_id", "expires_at", "updated_at")
    search_fields = ("name", "bucket__user_id")
    raw_id_fields = ("bucket",)


@admin.register(m.SecretProviderBinding)
class SecretProviderBindingAdmin(admin.ModelAdmin):
    list_display = ("provider_id", "user_id", "package_id", "secret_name", "updated_at")
    search_fields = ("user_id", "provider_id", "package_id")


@admin.register(m.SecretProviderGrant)
class SecretProviderGrantAdmin(admin.ModelAdmin):
    list_display = ("ref", "package_id", "binding_id", "user_id", "created_at")
    search_fields = ("user_id", "package_id", "ref")
    raw_id_fields = ("binding",)


# --- integrations ------------------------------------------------------------------------


@admin.register(m.UserOauthApp)
class UserOauthAppAdmin(NoAddModelAdmin):
    list_display = ("slug", "user_id", "provider", "flow", "updated_at")
    list_filter = ("flow",)
    search_fields = ("user_id", "slug", "provider")


@admin.register(m.UserIntegration)
class UserIntegrationAdmin(NoAddModelAdmin):
    list_display = ("name", "user_id", "app_slug", "platform_app", "connected_at")
    search_fields = ("user_id", "name", "app_slug")
    raw_id_fields = ("platform_app",)


@admin.register(m.UserOpenapiBinding)
class UserOpenapiBindingAdmin(admin.ModelAdmin):
    list_display = ("name", "user_id", "spec_title", "spec_version", "include_destructive")
    search_fields = ("user_id", "name", "spec_url")


@admin.register(m.UserOpenapiBindingOperation)
class UserOpenapiBindingOperationAdmin(admin.ModelAdmin):
    list_display = ("slug", "binding_name", "user_id", "updated_at")
    search_fields = ("user_id", "binding_name", "slug")


@admin.register(m.RemoteConnectorSetting)
class RemoteConnectorSettingAdmin(NoAddModelAdmin):
    exclude = ("encrypted_shared_secret",)
    list_display = ("instance_id", "user_id", "enabled", "attached", "updated_at")
    list_filter = ("enabled", "attached")
    search_fields = ("user_id", "instance_id")


# --- sources, repos, packages ------------------------------------------------------------


# Sources, repos and packages change only through git and publish: the admin
# shows them, it never edits them (an edited pointer would skip checks and snapshots).
@admin.register(m.EntitySource)
class EntitySourceAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "entity_kind", "entity_id", "user_id", "published_commit", "updated_at")
    list_filter = ("entity_kind",)
    search_fields = ("id", "user_id", "entity_id", "repo_id")


@admin.register(m.EntitySourceArtifactsPushSubscription)
class EntitySourceArtifactsPushSubscriptionAdmin(ReadOnlyModelAdmin):
    list_display = ("source_id", "user_id", "repo_id", "subscription_id")
    search_fields = ("source_id", "user_id", "repo_id")


@admin.register(m.SourceRepoRef)
class SourceRepoRefAdmin(ReadOnlyModelAdmin):
    list_display = ("repo_id", "name", "target", "updated_at")
    search_fields = ("repo_id", "target")


@admin.register(m.RepoToken)
class RepoTokenAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "user_id", "source_id", "access", "expires_at", "revoked_at")
    list_filter = ("access",)
    search_fields = ("user_id", "source_id")
    exclude = ("token_hash",)


@admin.register(m.UserRepo)
class UserRepoAdmin(ReadOnlyModelAdmin):
    list_display = ("name", "user_id", "updated_at")
    search_fields = ("user_id", "name", "id")


@admin.register(m.SavedPackage)
class SavedPackageAdmin(ReadOnlyModelAdmin):
    list_display = ("kody_id", "name", "user_id", "has_app", "hidden", "is_private", "locked_at")
    list_filter = ("has_app", "hidden", "is_private")
    search_fields = ("user_id", "kody_id", "name", "id", "source_id")


@admin.register(m.SavedPackageSearchIndexDebt)
class SavedPackageSearchIndexDebtAdmin(ReadOnlyModelAdmin):
    list_display = ("package_id", "user_id", "generation", "updated_at")
    search_fields = ("package_id", "user_id")


@admin.register(m.SearchIndexDebt)
class SearchIndexDebtAdmin(ReadOnlyModelAdmin):
    """Vectors still owed; ``attempts`` growing with a ``last_error`` means embedding fails."""

    list_display = ("kind", "source_id", "user_id", "attempts", "last_error", "available_at")
    list_filter = ("kind", "last_error")
    search_fields = ("user_id", "source_id")


@admin.register(m.PackageKodyIdRedirect)
class PackageKodyIdRedirectAdmin(admin.ModelAdmin):
    list_display = ("old_kody_id", "package_id", "user_id", "created_at")
    search_fields = ("user_id", "old_kody_id", "package_id")


@admin.register(m.PublishedBundleArtifact)
class PublishedBundleArtifactAdmin(ReadOnlyModelAdmin):
    list_display = ("source_id", "artifact_kind", "artifact_name", "entry_point", "created_at")
    list_filter = ("artifact_kind",)
    search_fields = ("user_id", "source_id", "published_commit")


# --- access ------------------------------------------------------------------------------


@admin.register(m.PackageInvocationToken)
class PackageInvocationTokenAdmin(NoAddModelAdmin):
    exclude = ("token_hash",)
    list_display = ("name", "user_id", "package_id", "last_used_at", "revoked_at")
    search_fields = ("user_id", "name", "package_id")


@admin.register(m.PackageScopeGrant)
class PackageScopeGrantAdmin(admin.ModelAdmin):
    list_display = ("scope_owner_user_id", "grantee_user_id", "created_by_user_id", "created_at")
    search_fields = ("scope_owner_user_id", "grantee_user_id")


@admin.register(m.PackageShareGrant)
class PackageShareGrantAdmin(admin.ModelAdmin):
    list_display = ("package_id", "owner_user_id", "grantee_user_id", "status", "role")
    list_filter = ("status",)
    search_fields = ("package_id", "owner_user_id", "grantee_user_id", "invitee_username")


@admin.register(m.WebhookEndpoint)
class WebhookEndpointAdmin(NoAddModelAdmin):
    exclude = ("url_secret_hash", "url_secret_encrypted")
    list_display = ("webhook_name", "package_id", "user_id", "enabled", "rotated_at")
    list_filter = ("enabled",)
    search_fields = ("user_id", "package_id", "webhook_name")


# --- runtime indexes (authoritative elsewhere) -------------------------------------------


@admin.register(m.PackageServiceState)
class PackageServiceStateAdmin(ReadOnlyModelAdmin):
    list_display = ("package_id", "service_name", "user_id", "status", "started_at")
    list_filter = ("status",)
    search_fields = ("user_id", "package_id", "service_name")


@admin.register(m.AgentPackageConversationUse)
class AgentPackageConversationUseAdmin(ReadOnlyModelAdmin):
    list_display = ("package_id", "conversation_id", "user_id", "last_used_at")
    search_fields = ("user_id", "package_id")


@admin.register(m.UserStorageBucket)
class UserStorageBucketAdmin(ReadOnlyModelAdmin):
    list_display = ("storage_id", "user_id", "kind", "estimated_bytes", "last_seen_at")
    list_filter = ("kind",)
    search_fields = ("user_id", "storage_id")


@admin.register(m.RepoSessionDueOwner)
class RepoSessionDueOwnerAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "due_at")
    search_fields = ("user_id",)


@admin.register(m.RepoSessionStorageBucketCursor)
class RepoSessionStorageBucketCursorAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "position", "updated_at")


@admin.register(m.VectorEmbedFingerprint)
class VectorEmbedFingerprintAdmin(ReadOnlyModelAdmin):
    list_display = ("vector_id", "user_id", "updated_at")
    search_fields = ("user_id", "vector_id")


# Platform apps, provider marks and the provider registry live in their own module.
# Codemod runs (tables, stop/resume, run.json and run/stop.json) too.
from apps.packages import (  # noqa: E402, F401
    codemod_admin,
    integration_admin,
)
