"""The database itself refuses rows that break the packages tables' stated constraints."""

from __future__ import annotations

import pytest

from apps.packages import models as p
from tests.packages.factories import ALICE, BOB, make, platform_app

pytestmark = pytest.mark.django_db


def test_every_packages_table_accepts_a_valid_row():
    for model in (
        p.McpUserServerInstructions,
        p.McpServerSetting,
        p.McpMemory,
        p.McpMemoryConversationSuppression,
        p.ValueEntry,
        p.SecretEntry,
        p.SecretProviderGrant,
        p.UserIntegration,
        p.UserOpenapiBindingOperation,
        p.RemoteConnectorSetting,
        p.EntitySource,
        p.EntitySourceArtifactsPushSubscription,
        p.UserRepo,
        p.SavedPackage,
        p.SavedPackageSearchIndexDebt,
        p.PackageKodyIdRedirect,
        p.PublishedBundleArtifact,
        p.PackageInvocationToken,
        p.PackageServiceState,
        p.PackageScopeGrant,
        p.PackageShareGrant,
        p.PackageCodemodRun,
        p.PackageCodemodRunItem,
        p.AgentPackageConversationUse,
        p.WebhookEndpoint,
        p.UserStorageBucket,
        p.RepoSessionDueOwner,
        p.RepoSessionStorageBucketCursor,
        p.VectorEmbedFingerprint,
    ):
        make(model)
        assert model.objects.count() >= 1, model.__name__


# --- MCP and memories --------------------------------------------------------------------


def test_server_names_are_unique_per_user(refused):
    make(p.McpServerSetting)
    make(p.McpServerSetting, user_id=BOB)
    refused(lambda: make(p.McpServerSetting))


def test_memory_status_is_a_closed_set(refused):
    refused(lambda: make(p.McpMemory, status="forgotten"))


def test_one_suppression_per_user_conversation_and_memory(refused):
    row = make(p.McpMemoryConversationSuppression)
    refused(lambda: make(p.McpMemoryConversationSuppression, memory=row.memory))


def test_suppression_needs_an_existing_memory_and_cascades_with_it(refused, sql):
    refused(lambda: make(p.McpMemoryConversationSuppression, memory=p.McpMemory(id="ghost")))
    row = make(p.McpMemoryConversationSuppression)
    sql("DELETE FROM mcp_memories WHERE id = %s", (row.memory_id,))
    assert not p.McpMemoryConversationSuppression.objects.exists()


# --- values and secrets ------------------------------------------------------------------


def test_value_bucket_scope_is_a_closed_set_and_unique(refused):
    refused(lambda: make(p.ValueBucket, scope="package"))
    make(p.ValueBucket)
    refused(lambda: make(p.ValueBucket))


def test_value_entry_names_are_unique_per_bucket_and_cascade(refused, sql):
    entry = make(p.ValueEntry)
    refused(lambda: make(p.ValueEntry, bucket=entry.bucket))
    sql("DELETE FROM value_buckets WHERE id = %s", (entry.bucket_id,))
    assert not p.ValueEntry.objects.exists()


def test_secret_bucket_scope_is_a_closed_set_and_unique(refused):
    refused(lambda: make(p.SecretBucket, scope="app"))
    make(p.SecretBucket, scope="package", binding_key="pkg-1")
    refused(lambda: make(p.SecretBucket, scope="package", binding_key="pkg-1"))


def test_secret_entry_names_are_unique_per_bucket_and_cascade(refused, sql):
    entry = make(p.SecretEntry, expires_at=None)
    refused(lambda: make(p.SecretEntry, bucket=entry.bucket))
    sql("DELETE FROM secret_buckets WHERE id = %s", (entry.bucket_id,))
    assert not p.SecretEntry.objects.exists()


def test_one_binding_per_provider_per_account(refused):
    make(p.SecretProviderBinding)
    refused(lambda: make(p.SecretProviderBinding, package_id="pkg-9"))


def test_unbinding_a_provider_drops_its_grants(refused, sql):
    grant = make(p.SecretProviderGrant)
    refused(lambda: make(p.SecretProviderGrant, binding=grant.binding))
    sql("DELETE FROM secret_provider_bindings WHERE id = %s", (grant.binding_id,))
    assert not p.SecretProviderGrant.objects.exists()


# --- integrations ------------------------------------------------------------------------


def test_oauth_app_slugs_are_unique_per_user(refused):
    make(p.UserOauthApp)
    make(p.UserOauthApp, user_id=BOB)
    refused(lambda: make(p.UserOauthApp))


def test_integration_names_exactly_one_app(refused):
    make(p.UserOauthApp)
    platform_app("google")
    refused(lambda: make(p.UserIntegration, app_slug=None, platform_app=None))
    refused(lambda: make(p.UserIntegration, app_slug="my-github", platform_app_id="google"))
    make(p.UserIntegration, name="gmail", app_slug=None, platform_app_id="google")


def test_integration_names_are_unique_per_user(refused):
    make(p.UserIntegration)
    refused(lambda: make(p.UserIntegration, app_slug="my-github"))


def test_integration_app_must_be_the_users_own_app(refused):
    make(p.UserOauthApp, user_id=BOB)
    # Bob's app slug does not satisfy the composite key for Alice's row.
    refused(lambda: make(p.UserIntegration, app_slug="my-github"))


def test_an_oauth_app_in_use_cannot_be_deleted(refused, sql):
    integration = make(p.UserIntegration)
    refused(lambda: sql("DELETE FROM user_oauth_apps WHERE slug = %s", (integration.app_slug,)))
    sql("DELETE FROM user_integrations WHERE id = %s", (integration.id,))
    assert sql("DELETE FROM user_oauth_apps WHERE slug = %s", (integration.app_slug,)) == 1


def test_platform_app_must_exist_and_cannot_be_deleted_while_used(refused, sql):
    refused(lambda: make(p.UserIntegration, app_slug=None, platform_app_id="missing"))
    platform_app("google")
    make(p.UserIntegration, app_slug=None, platform_app_id="google")
    refused(lambda: sql("DELETE FROM platform_oauth_apps WHERE slug = 'google'"))


def test_openapi_binding_names_are_unique_per_user(refused):
    make(p.UserOpenapiBinding)
    refused(lambda: make(p.UserOpenapiBinding))


def test_binding_operations_belong_to_a_binding_and_cascade(refused, sql):
    refused(lambda: make(p.UserOpenapiBindingOperation, binding_name="nope"))
    op = make(p.UserOpenapiBindingOperation)
    refused(lambda: make(p.UserOpenapiBindingOperation, binding_name=op.binding_name))
    sql("DELETE FROM user_openapi_bindings WHERE user_id = %s", (ALICE,))
    assert not p.UserOpenapiBindingOperation.objects.exists()


def test_remote_connector_instances_are_unique_per_user(refused):
    make(p.RemoteConnectorSetting)
    refused(lambda: make(p.RemoteConnectorSetting))


# --- sources, repos, packages ------------------------------------------------------------


def test_entity_source_kind_and_uniqueness(refused):
    refused(lambda: make(p.EntitySource, entity_kind="workflow"))
    make(p.EntitySource)
    refused(lambda: make(p.EntitySource, repo_id="repo-2"))
    refused(lambda: make(p.EntitySource, entity_id="pkg-2"))  # repo_id reused


def test_push_subscription_repo_is_unique(refused):
    make(p.EntitySourceArtifactsPushSubscription)
    refused(lambda: make(p.EntitySourceArtifactsPushSubscription, source_id="src-2"))


def test_repo_names_are_unique_per_user(refused):
    make(p.UserRepo)
    make(p.UserRepo, user_id=BOB)
    refused(lambda: make(p.UserRepo))


def test_saved_package_kody_id_name_and_source_are_unique(refused):
    make(p.SavedPackage)
    refused(lambda: make(p.SavedPackage, name="other", source_id="src-2"))
    refused(lambda: make(p.SavedPackage, kody_id="@alice/other", source_id="src-2"))
    refused(lambda: make(p.SavedPackage, user_id=BOB))  # same source_id
    make(p.SavedPackage, user_id=BOB, source_id="src-2")


def test_kody_id_redirects_are_unique_per_user(refused):
    make(p.PackageKodyIdRedirect)
    refused(lambda: make(p.PackageKodyIdRedirect, package_id="pkg-2"))


def test_bundle_artifacts_treat_a_missing_name_as_empty(refused):
    make(p.PublishedBundleArtifact)
    refused(lambda: make(p.PublishedBundleArtifact, published_commit="c2"))
    refused(lambda: make(p.PublishedBundleArtifact, artifact_name=""))
    make(p.PublishedBundleArtifact, artifact_name="worker")
    refused(lambda: make(p.PublishedBundleArtifact, artifact_name="worker"))
    make(p.PublishedBundleArtifact, entry_point="other.ts")


# --- access ------------------------------------------------------------------------------


def test_invocation_token_hashes_are_unique(refused):
    make(p.PackageInvocationToken)
    refused(lambda: make(p.PackageInvocationToken, user_id=BOB, name="other"))


def test_service_state_status_and_key(refused):
    refused(lambda: make(p.PackageServiceState, status="paused"))
    make(p.PackageServiceState)
    refused(lambda: make(p.PackageServiceState, status="idle"))


def test_scope_grants_never_grant_an_owner_to_itself(refused):
    refused(lambda: make(p.PackageScopeGrant, grantee_user_id=ALICE))
    make(p.PackageScopeGrant)
    refused(lambda: make(p.PackageScopeGrant))


def test_conversation_uses_are_unique(refused):
    make(p.AgentPackageConversationUse)
    refused(lambda: make(p.AgentPackageConversationUse))


def test_webhook_names_are_unique_per_package(refused):
    make(p.WebhookEndpoint)
    make(p.WebhookEndpoint, package_id="pkg-2")
    refused(lambda: make(p.WebhookEndpoint))


# --- runtime indexes ---------------------------------------------------------------------


def test_storage_bucket_kind_and_key(refused):
    refused(lambda: make(p.UserStorageBucket, kind="blob"))
    make(p.UserStorageBucket, kind="repo_session", storage_id="repo-session:1")
    make(p.UserStorageBucket)
    refused(lambda: make(p.UserStorageBucket, kind="job"))


def test_repo_session_cursor_is_a_singleton(refused):
    make(p.RepoSessionStorageBucketCursor)
    refused(lambda: make(p.RepoSessionStorageBucketCursor, id=2))


def test_fingerprints_are_unique_per_namespace(refused):
    make(p.VectorEmbedFingerprint)
    make(p.VectorEmbedFingerprint, user_id="__kody_builtin__")
    refused(lambda: make(p.VectorEmbedFingerprint, fingerprint="cd" * 32))
