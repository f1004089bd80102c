"""factory_boy factories for the packages app: one valid row per model; tests override the
columns they probe (``McpMemoryFactory(status="deleted")``) or go through ``tests.rows.make``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.db import models
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.packages import models as p
from tests.accounts.factories import PlatformOAuthAppFactory
from tests.rows import ALICE, BOB, registers

__all__ = ["ALICE", "BOB", "make", "platform_app"]

now = factory.LazyFunction(timezone.now)
tomorrow = factory.LazyFunction(lambda: timezone.now() + timedelta(days=1))


def _factory(model: type[models.Model], **fields: Any) -> type[DjangoModelFactory]:
    return registers(factory.make_factory(model, FACTORY_CLASS=DjangoModelFactory, **fields))


def platform_app(slug: str = "google", **kw: Any) -> models.Model:
    """An operator-registered OAuth app (accounts' ``PlatformOAuthApp``)."""
    return PlatformOAuthAppFactory(slug=slug, **kw)


McpUserServerInstructionsFactory = _factory(
    p.McpUserServerInstructions, user_id=ALICE, instructions="be brief"
)
McpServerSettingFactory = _factory(
    p.McpServerSetting, user_id=ALICE, name="github", url="https://mcp.example.com"
)
McpMemoryFactory = _factory(p.McpMemory, user_id=ALICE, subject="prefers tabs", status="active")
McpMemoryConversationSuppressionFactory = _factory(
    p.McpMemoryConversationSuppression,
    memory=factory.SubFactory(McpMemoryFactory),
    user_id=ALICE,
    conversation_id="conv-1",
    last_seen_at=now,
    expires_at=tomorrow,
)
ValueBucketFactory = _factory(p.ValueBucket, user_id=ALICE, scope="user", binding_key="")
ValueEntryFactory = _factory(
    p.ValueEntry, bucket=factory.SubFactory(ValueBucketFactory), name="color", value="blue"
)
SecretBucketFactory = _factory(p.SecretBucket, user_id=ALICE, scope="user", binding_key="")
SecretEntryFactory = _factory(
    p.SecretEntry,
    bucket=factory.SubFactory(SecretBucketFactory),
    name="API_KEY",
    encrypted_value="SECRET-CIPHERTEXT",
    lookup_hash="LOOKUP-HASH",
)
SecretProviderBindingFactory = _factory(
    p.SecretProviderBinding,
    user_id=ALICE,
    provider_id="vault",
    package_id="pkg-1",
    secret_name="door",
)
SecretProviderGrantFactory = _factory(
    p.SecretProviderGrant,
    binding=factory.SubFactory(SecretProviderBindingFactory),
    user_id=ALICE,
    package_id="pkg-2",
    ref="db/password",
)
IntegrationProviderFactory = _factory(
    p.IntegrationProvider,
    slug="acme",
    label="Acme",
    authorize_url="https://acme.example/oauth/authorize",
    token_url="https://acme.example/oauth/token",
    required_hosts_json=["api.acme.example"],
)
UserOauthAppFactory = _factory(
    p.UserOauthApp,
    user_id=ALICE,
    slug="my-github",
    provider="github",
    client_id="cid",
    client_secret_secret_name="oauth-app.my-github.client_secret",
    token_url="https://github.com/login/oauth/access_token",
    authorize_url="https://github.com/login/oauth/authorize",
)


@registers
class UserIntegrationFactory(DjangoModelFactory):
    """Connected through the user's own OAuth app unless ``platform_app`` is given."""

    class Meta:
        model = p.UserIntegration

    user_id = ALICE
    name = "github"
    access_token_secret_name = "integration.github.access_token"
    refresh_token_secret_name = "integration.github.refresh_token"

    @classmethod
    def _create(cls, model_class: type[models.Model], *args: Any, **kwargs: Any) -> Any:
        if "app_slug" not in kwargs and "platform_app" not in kwargs:
            kwargs["app_slug"] = UserOauthAppFactory().slug
        return super()._create(model_class, *args, **kwargs)


UserOpenapiBindingFactory = _factory(
    p.UserOpenapiBinding, user_id=ALICE, name="petstore", spec_url="https://x/spec"
)


@registers
class UserOpenapiBindingOperationFactory(DjangoModelFactory):
    class Meta:
        model = p.UserOpenapiBindingOperation

    user_id = ALICE
    slug = "list-pets"

    @classmethod
    def _create(cls, model_class: type[models.Model], *args: Any, **kwargs: Any) -> Any:
        if "binding_name" not in kwargs:
            kwargs["binding_name"] = UserOpenapiBindingFactory().name
        return super()._create(model_class, *args, **kwargs)


RemoteConnectorSettingFactory = _factory(
    p.RemoteConnectorSetting,
    user_id=ALICE,
    instance_id="laptop",
    encrypted_shared_secret="RC-CIPHERTEXT",
)
EntitySourceFactory = _factory(
    p.EntitySource, user_id=ALICE, entity_kind="package", entity_id="pkg-1", repo_id="repo-1"
)
EntitySourceArtifactsPushSubscriptionFactory = _factory(
    p.EntitySourceArtifactsPushSubscription,
    source_id="src-1",
    user_id=ALICE,
    repo_id="repo-1",
    subscription_id="sub-1",
)
UserRepoFactory = _factory(p.UserRepo, user_id=ALICE, name="notes")
SourceRepoRefFactory = _factory(
    p.SourceRepoRef, repo_id="repo-1", name="refs/heads/main", target="a" * 40
)
RepoTokenFactory = _factory(
    p.RepoToken,
    user_id=ALICE,
    source_id="src-1",
    access="read",
    token_hash="TOKEN-HASH-1",
    expires_at=tomorrow,
)
SavedPackageFactory = _factory(
    p.SavedPackage, user_id=ALICE, name="weather", kody_id="@alice/weather", source_id="src-1"
)
SavedPackageSearchIndexDebtFactory = _factory(
    p.SavedPackageSearchIndexDebt, package_id="pkg-1", user_id=ALICE
)
SearchIndexDebtFactory = _factory(
    p.SearchIndexDebt, kind="memory", user_id=ALICE, source_id="mem-1", available_at=now
)
PackageKodyIdRedirectFactory = _factory(
    p.PackageKodyIdRedirect, user_id=ALICE, old_kody_id="@alice/old", package_id="pkg-1"
)
PublishedBundleArtifactFactory = _factory(
    p.PublishedBundleArtifact,
    user_id=ALICE,
    source_id="src-1",
    published_commit="c1",
    artifact_kind="export",
    artifact_name=None,
    entry_point="index.ts",
    kv_key="bundle-artifact:v1:x",
)
PackageInvocationTokenFactory = _factory(
    p.PackageInvocationToken,
    user_id=ALICE,
    package_id="pkg-1",
    name="ci",
    token_hash="TOKEN-HASH-1",
)
PackageServiceStateFactory = _factory(
    p.PackageServiceState,
    user_id=ALICE,
    package_id="pkg-1",
    service_name="poller",
    status="running",
)
PackageScopeGrantFactory = _factory(
    p.PackageScopeGrant,
    scope_owner_user_id=ALICE,
    grantee_user_id=BOB,
    created_by_user_id=ALICE,
)
PackageShareGrantFactory = _factory(
    p.PackageShareGrant, package_id="pkg-1", owner_user_id=ALICE, grantee_user_id=BOB
)
PackageCodemodRunFactory = _factory(
    p.PackageCodemodRun,
    codemod_id="rename-import",
    mode="scan",
    initiated_by_user_id=ALICE,
    status="complete",
)
PackageCodemodRunItemFactory = _factory(
    p.PackageCodemodRunItem,
    run_id="run-1",
    user_id=ALICE,
    package_id="pkg-1",
    kody_id="@alice/weather",
    status="changed",
)
AgentPackageConversationUseFactory = _factory(
    p.AgentPackageConversationUse,
    user_id=ALICE,
    package_id="pkg-1",
    conversation_id="conv-1",
    first_used_at=now,
    last_used_at=now,
)
WebhookEndpointFactory = _factory(
    p.WebhookEndpoint,
    user_id=ALICE,
    package_id="pkg-1",
    webhook_name="github",
    url_secret_hash="URL-SECRET-HASH",
    url_secret_encrypted="URL-CIPHERTEXT",
)
UserStorageBucketFactory = _factory(
    p.UserStorageBucket,
    user_id=ALICE,
    storage_id="package:pkg-1",
    kind="package",
    last_seen_at=now,
)
RepoSessionDueOwnerFactory = _factory(p.RepoSessionDueOwner, user_id=ALICE, due_at=now)
RepoSessionStorageBucketCursorFactory = _factory(
    p.RepoSessionStorageBucketCursor, id=1, position=ALICE
)
VectorEmbedFingerprintFactory = _factory(
    p.VectorEmbedFingerprint, user_id=ALICE, vector_id="memory_1", fingerprint="ab" * 32
)


def make(model: type[models.Model], **overrides: Any) -> Any:
    """``tests.rows.make``: a valid row of any packages, community or mailbox model."""
    from tests.rows import make as make_row

    return make_row(model, **overrides)


def package_files(username: str, name: str = "greeter", body: str | None = None) -> dict:
    """A minimal package that passes every publish check (manifest, docs, types, bundle)."""
    import json

    return {
        "package.json": json.dumps(
            {
                "name": f"@{username}/{name}",
                "exports": {".": "./mod.ts"},
                "kody": {"description": "Greets people politely.", "tags": ["examples"]},
            }
        ),
        "README.md": "# Greeter\n\nSays hello.\n",
        "mod.ts": body
        or "export function greet(name: string): string {\n  return `hi ${name}`;\n}\n",
    }
