"""One valid row per model; tests override the columns they are probing."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.db import models
from django.utils import timezone

from apps.community import models as c
from apps.mailbox import models as mb
from apps.packages import models as p


def uid(name: str) -> str:
    """A realistic 64-hex stable user id."""
    return hashlib.sha256(f"{name}@example.com".encode()).hexdigest()


ALICE = uid("alice")
BOB = uid("bob")
SOON = timezone.now() + timedelta(days=1)


def platform_app(slug: str = "google", **kw: Any) -> models.Model:
    model = apps.get_model("accounts", "PlatformOAuthApp")
    fields = {
        "slug": slug,
        "provider": "google",
        "client_id": "client-1",
        "client_secret_encrypted": "PLATFORM-CIPHERTEXT",
        "token_url": "https://oauth.example.com/token",
        "authorize_url": "https://oauth.example.com/authorize",
        "flow": "confidential",
    }
    return model.objects.create(**{**fields, **kw})


def _defaults() -> dict[type[models.Model], dict[str, Any]]:
    now = timezone.now()
    return {
        p.McpUserServerInstructions: {"user_id": ALICE, "instructions": "be brief"},
        p.McpServerSetting: {"user_id": ALICE, "name": "github", "url": "https://mcp.example.com"},
        p.McpMemory: {"user_id": ALICE, "subject": "prefers tabs", "status": "active"},
        p.ValueBucket: {"user_id": ALICE, "scope": "user", "binding_key": ""},
        p.SecretBucket: {"user_id": ALICE, "scope": "user", "binding_key": ""},
        p.SecretProviderBinding: {
            "user_id": ALICE,
            "provider_id": "vault",
            "package_id": "pkg-1",
            "secret_name": "door",
        },
        p.UserOauthApp: {
            "user_id": ALICE,
            "slug": "my-github",
            "provider": "github",
            "client_id": "cid",
            "client_secret_encrypted": "APP-CIPHERTEXT",
            "token_url": "https://github.com/login/oauth/access_token",
            "authorize_url": "https://github.com/login/oauth/authorize",
        },
        p.UserOpenapiBinding: {"user_id": ALICE, "name": "petstore", "spec_url": "https://x/spec"},
        p.RemoteConnectorSetting: {
            "user_id": ALICE,
            "instance_id": "laptop",
            "encrypted_shared_secret": "RC-CIPHERTEXT",
        },
        p.EntitySource: {
            "user_id": ALICE,
            "entity_kind": "package",
            "entity_id": "pkg-1",
            "repo_id": "repo-1",
        },
        p.EntitySourceArtifactsPushSubscription: {
            "source_id": "src-1",
            "user_id": ALICE,
            "repo_id": "repo-1",
            "subscription_id": "sub-1",
        },
        p.UserRepo: {"user_id": ALICE, "name": "notes"},
        p.SavedPackage: {
            "user_id": ALICE,
            "name": "weather",
            "kody_id": "@alice/weather",
            "source_id": "src-1",
        },
        p.SavedPackageSearchIndexDebt: {"package_id": "pkg-1", "user_id": ALICE},
        p.PackageKodyIdRedirect: {
            "user_id": ALICE,
            "old_kody_id": "@alice/old",
            "package_id": "pkg-1",
        },
        p.PublishedBundleArtifact: {
            "user_id": ALICE,
            "source_id": "src-1",
            "published_commit": "c1",
            "artifact_kind": "export",
            "artifact_name": None,
            "entry_point": "index.ts",
            "kv_key": "bundle-artifact:v1:x",
        },
        p.PackageInvocationToken: {
            "user_id": ALICE,
            "package_id": "pkg-1",
            "name": "ci",
            "token_hash": "TOKEN-HASH-1",
        },
        p.PackageServiceState: {
            "user_id": ALICE,
            "package_id": "pkg-1",
            "service_name": "poller",
            "status": "running",
        },
        p.PackageScopeGrant: {
            "scope_owner_user_id": ALICE,
            "grantee_user_id": BOB,
            "created_by_user_id": ALICE,
        },
        p.PackageShareGrant: {
            "package_id": "pkg-1",
            "owner_user_id": ALICE,
            "grantee_user_id": BOB,
        },
        p.PackageCodemodRun: {
            "codemod_id": "rename-import",
            "mode": "scan",
            "initiated_by_user_id": ALICE,
            "status": "complete",
        },
        p.PackageCodemodRunItem: {
            "run_id": "run-1",
            "user_id": ALICE,
            "package_id": "pkg-1",
            "kody_id": "@alice/weather",
            "status": "changed",
        },
        p.AgentPackageConversationUse: {
            "user_id": ALICE,
            "package_id": "pkg-1",
            "conversation_id": "conv-1",
            "first_used_at": now,
            "last_used_at": now,
        },
        p.WebhookEndpoint: {
            "user_id": ALICE,
            "package_id": "pkg-1",
            "webhook_name": "github",
            "url_secret_hash": "URL-SECRET-HASH",
            "url_secret_encrypted": "URL-CIPHERTEXT",
        },
        p.UserStorageBucket: {
            "user_id": ALICE,
            "storage_id": "package:pkg-1",
            "kind": "package",
            "last_seen_at": now,
        },
        p.RepoSessionDueOwner: {"user_id": ALICE, "due_at": now},
        p.RepoSessionStorageBucketCursor: {"id": 1, "position": ALICE},
        p.VectorEmbedFingerprint: {
            "user_id": ALICE,
            "vector_id": "memory_1",
            "fingerprint": "ab" * 32,
        },
        c.CommunityListing: {
            "owner_user_id": ALICE,
            "package_id": "pkg-1",
            "source_id": "src-1",
            "kody_id": "@alice/weather",
            "name": "weather",
            "pinned_commit": "c1",
            "category": "utilities",
        },
        c.CommunityRating: {
            "listing_id": "lst-1",
            "user_id": BOB,
            "stars": 5,
            "adaptation_effort": 2,
        },
        c.CommunityReport: {
            "listing_id": "lst-1",
            "listing_owner_user_id": ALICE,
            "reporter_user_id": BOB,
            "reason": "spam",
        },
        c.CommunityBan: {"user_id": BOB, "banned_by_user_id": ALICE, "reason": "spam"},
        c.CommunityStar: {"listing_id": "lst-1", "user_id": BOB},
        c.CommunityActivityEvent: {
            "actor_user_id": ALICE,
            "event_type": "listing_published",
            "listing_id": "lst-1",
        },
        c.CommunityFork: {
            "listing_id": "lst-1",
            "forker_user_id": BOB,
            "origin_commit": "c1",
            "forked_package_id": "pkg-2",
            "forked_source_id": "src-2",
            "target_kody_id": "@bob/weather",
            "actor": "agent",
        },
        c.UserFollow: {"follower_user_id": BOB, "followee_user_id": ALICE},
        mb.EmailInbox: {"user_id": ALICE, "name": "main"},
        mb.EmailSenderIdentity: {
            "user_id": ALICE,
            "email": "alice@alice.kody.run",
            "domain": "alice.kody.run",
        },
        mb.EmailSenderRule: {
            "user_id": ALICE,
            "kind": "domain",
            "value": "spam.example",
            "effect": "block",
        },
        mb.EmailOutboundProviderIndex: {
            "provider": "cloudflare-email",
            "provider_message_id": "pm-1",
            "user_id": ALICE,
            "message_id": "msg-1",
            "inbox_id": "inbox-1",
        },
        mb.EmailOutboundProviderIndexRepairOwner: {"user_id": ALICE, "pending_count": 1},
        mb.EmailInboundDueOwner: {"user_id": ALICE, "due_at": now, "reason": "stale"},
        mb.EmailDeliveryAlertEvent: {
            "provider_event_id": "ev-1",
            "provider": "cloudflare-email",
            "event_type": "bounced",
            "occurred_at": now,
            "owner_hash": "h",
        },
    }


def make(model: type[models.Model], **overrides: Any) -> Any:
    """Create a valid row (parents included for child tables)."""
    if model is p.McpMemoryConversationSuppression:
        overrides.setdefault("memory", make(p.McpMemory))
        base = {
            "user_id": ALICE,
            "conversation_id": "conv-1",
            "last_seen_at": timezone.now(),
            "expires_at": SOON,
        }
    elif model is p.ValueEntry:
        overrides.setdefault("bucket", make(p.ValueBucket))
        base = {"name": "color", "value": "blue"}
    elif model is p.SecretEntry:
        overrides.setdefault("bucket", make(p.SecretBucket))
        base = {
            "name": "API_KEY",
            "encrypted_value": "SECRET-CIPHERTEXT",
            "lookup_hash": "LOOKUP-HASH",
        }
    elif model is p.SecretProviderGrant:
        overrides.setdefault("binding", make(p.SecretProviderBinding))
        base = {"user_id": ALICE, "package_id": "pkg-2", "ref": "db/password"}
    elif model is p.UserIntegration:
        if "app_slug" not in overrides and "platform_app" not in overrides:
            overrides["app_slug"] = make(p.UserOauthApp).slug
        base = {
            "user_id": ALICE,
            "name": "github",
            "access_token_encrypted": "ACCESS-CIPHERTEXT",
            "refresh_token_encrypted": "REFRESH-CIPHERTEXT",
        }
    elif model is p.UserOpenapiBindingOperation:
        if "binding_name" not in overrides:
            overrides["binding_name"] = make(p.UserOpenapiBinding).name
        base = {"user_id": ALICE, "slug": "list-pets"}
    elif model is mb.EmailInboxAddress:
        overrides.setdefault("inbox", make(mb.EmailInbox))
        base = {
            "user_id": ALICE,
            "address": "alice@alice.kody.run",
            "local_part": "alice",
            "domain": "alice.kody.run",
        }
    elif model is mb.EmailUserGraphAuthority:
        return mb.EmailUserGraphAuthority.objects.get(id=1)
    else:
        base = _defaults()[model]
    return model.objects.create(**{**base, **overrides})
