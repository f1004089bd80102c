"""The one list of every user-owned table.

Account deletion and export both read this module, and ``tests/accounts/test_surfaces_guardrail.py``
introspects the migrated database and fails when a table with a user-ownership column
(``user_id``, ``*_user_id``, ``owner_*``) is neither declared here nor named as operator-owned or
global with a reason. Adding a model therefore forces a decision about deletion and export.

A new table goes in one of the lists below: ``USER_TABLE_TARGETS`` (the user's rows, deleted
and usually exported), ``OPERATOR_OWNED_TABLES``, ``GLOBAL_TABLES`` or ``KERNEL_TABLES`` (named
with the reason they are not the user's). What each match kind means is in
``apps.accounts.surface_kinds``. What lives outside these tables — blob prefixes, KV key
families, vectors, per-user schemas — is declared in ``apps.accounts.out_of_band_surfaces``;
the actors' export and purge hooks register in ``apps.accounts.actor_surfaces``.
"""

from __future__ import annotations

from apps.accounts.surface_kinds import ExcludedTable, Match, TableTarget


def _listing_child(table: str) -> TableTarget:
    """Other people's rows on the user's own listings: deleted with the listing, not exported."""
    return TableTarget(
        table,
        Match.LISTING_CHILD,
        columns=("listing_id",),
        parent="community_listings",
        export=False,
    )


# Deletion runs the D1-style targets in this order (children before parents); export reads the
# same list. Each app owns its own block; keep blocks in dependency order.
USER_TABLE_TARGETS: tuple[TableTarget, ...] = (
    # --- accounts -------------------------------------------------------------------------
    TableTarget("feature_flag_exposure_rollups", Match.USER_ID),
    TableTarget("mcp_agent_sessions", Match.USER_ID),
    TableTarget(
        "account_write_lease_repairs",
        Match.REPLACE_USER_COLUMN,
        columns=("target_user_id", "repaired_by_user_id"),
        export=False,
        redact=("lease_token",),
        note="admin repair audit log: the row stays, the user reference is rewritten",
    ),
    TableTarget(
        "platform_feedback",
        Match.USER_COLUMNS,
        columns=("submitter_user_id",),
        redact=("reviewed_by_user_id", "reviewed_at", "admin_note"),
        note="the submitter's own rows; internal review metadata is redacted in export",
    ),
    TableTarget(
        "platform_feedback",
        Match.NULL_USER_COLUMN,
        columns=("reviewed_by_user_id",),
        export=False,
        note="a deleted admin reviewer: also clears reviewed_at and admin_note",
    ),
    TableTarget(
        "kody_lanes",
        Match.NULL_USER_COLUMN,
        columns=("paused_by_user_id",),
        export=False,
        note="a deleted operator who paused a lane: the pause and its reason stay",
    ),
    TableTarget("user_usage_campaign_sends", Match.USER_ID),
    TableTarget("user_usage_campaigns", Match.USER_ID),
    TableTarget("user_tips_email_opt_outs", Match.USER_ID),
    TableTarget(
        "referrals",
        Match.USER_COLUMNS,
        columns=("referrer_stable_user_id", "referee_stable_user_id"),
        note="either party's row; the other party's id is replaced with [redacted] in export",
    ),
    TableTarget("username_redirects", Match.USER_ID),
    # --- entitlements ---------------------------------------------------------------------
    TableTarget("usage_rollups", Match.USER_ID),
    TableTarget("compute_overage_invoices", Match.USER_ID),
    TableTarget(
        "usage_events",
        Match.USER_ID,
        export=False,
        note="append-only telemetry (the Analytics Engine stand-in); reporting only",
    ),
    # --- packages -------------------------------------------------------------------------
    TableTarget("package_invocation_tokens", Match.USER_ID, redact=("token_hash",)),
    TableTarget("package_service_states", Match.USER_ID),
    TableTarget("user_storage_buckets", Match.USER_ID),
    TableTarget("agent_package_conversation_uses", Match.USER_ID),
    TableTarget("package_codemod_run_items", Match.USER_ID),
    TableTarget(
        "package_codemod_runs",
        Match.REPLACE_USER_COLUMN,
        columns=("scope_user_id", "initiated_by_user_id"),
        export=False,
        note="operator run rows; filters_json also has the id rewritten (JSON replace)",
        json_columns=("filters_json",),
    ),
    TableTarget(
        "mcp_memory_conversation_suppressions",
        Match.USER_ID,
        note="original kind mcp_memory_suppression; cascades from mcp_memories too",
    ),
    TableTarget("mcp_memories", Match.USER_ID),
    TableTarget("mcp_user_server_instructions", Match.USER_ID),
    TableTarget(
        "value_entries", Match.BUCKET_PARENT, columns=("bucket_id",), parent="value_buckets"
    ),
    TableTarget("value_buckets", Match.USER_ID),
    TableTarget(
        "secret_entries",
        Match.BUCKET_PARENT,
        columns=("bucket_id",),
        parent="secret_buckets",
        redact=("encrypted_value", "lookup_hash"),
    ),
    TableTarget("secret_buckets", Match.USER_ID),
    TableTarget("secret_provider_grants", Match.USER_ID),
    TableTarget("secret_provider_bindings", Match.USER_ID),
    # Their tokens and client secrets are secret_entries (redacted above); only names here.
    TableTarget("user_integrations", Match.USER_ID),
    TableTarget("user_oauth_apps", Match.USER_ID),
    TableTarget("user_openapi_binding_operations", Match.USER_ID),
    TableTarget("user_openapi_bindings", Match.USER_ID),
    TableTarget("remote_connector_settings", Match.USER_ID, redact=("encrypted_shared_secret",)),
    TableTarget("mcp_server_settings", Match.USER_ID),
    TableTarget("published_bundle_artifacts", Match.USER_ID),
    TableTarget("repo_session_due_owners", Match.USER_ID, export=False),
    TableTarget("user_repos", Match.USER_ID),
    TableTarget("saved_packages", Match.USER_ID),
    TableTarget("saved_package_search_index_debt", Match.USER_ID, export=False),
    TableTarget("entity_source_artifacts_push_subscriptions", Match.USER_ID),
    TableTarget("repo_tokens", Match.USER_ID, export=False, redact=("token_hash",)),
    TableTarget("entity_sources", Match.USER_ID),
    TableTarget(
        "webhook_endpoints", Match.USER_ID, redact=("url_secret_hash", "url_secret_encrypted")
    ),
    TableTarget(
        "package_scope_grants",
        Match.USER_COLUMNS,
        columns=("scope_owner_user_id", "grantee_user_id"),
    ),
    TableTarget(
        "package_scope_grants",
        Match.REPLACE_USER_COLUMN,
        columns=("created_by_user_id",),
        export=False,
    ),
    TableTarget(
        "package_share_grants", Match.USER_COLUMNS, columns=("owner_user_id", "grantee_user_id")
    ),
    TableTarget("package_kody_id_redirects", Match.USER_ID),
    TableTarget(
        "search_index_debt",
        Match.USER_ID,
        export=False,
        note="derived work queue (ids only): vectors still to write for the user's rows",
    ),
    TableTarget(
        "vector_embed_fingerprints",
        Match.USER_ID,
        export=False,
        note="derived skip cache; user_id is the vector namespace",
    ),
    # --- community ------------------------------------------------------------------------
    # Each child table pairs "rows on the user's own listings" with "the user's own rows".
    _listing_child("community_ratings"),
    TableTarget("community_ratings", Match.USER_ID),
    _listing_child("community_stars"),
    TableTarget("community_stars", Match.USER_ID),
    _listing_child("community_activity_events"),
    TableTarget("community_activity_events", Match.USER_COLUMNS, columns=("actor_user_id",)),
    # Forks made *from* the user's listings are the forkers' rows and keep their provenance
    # snapshot (listing name and kody id leaf, no owner id), so no listing_child here.
    TableTarget("community_forks", Match.USER_COLUMNS, columns=("forker_user_id",)),
    _listing_child("community_reports"),
    TableTarget(
        "community_reports",
        Match.USER_COLUMNS,
        columns=("listing_owner_user_id",),
        export=False,
        note="deletion only: reports against the user's listings",
    ),
    TableTarget("community_reports", Match.USER_COLUMNS, columns=("reporter_user_id",)),
    TableTarget(
        "user_follows", Match.USER_COLUMNS, columns=("follower_user_id", "followee_user_id")
    ),
    TableTarget(
        "community_reports",
        Match.NULL_USER_COLUMN,
        columns=("resolved_by_user_id",),
        export=False,
    ),
    TableTarget("community_bans", Match.USER_COLUMNS, columns=("user_id",)),
    TableTarget(
        "community_bans", Match.REPLACE_USER_COLUMN, columns=("banned_by_user_id",), export=False
    ),
    TableTarget(
        "community_listings",
        Match.REPLACE_USER_COLUMN,
        columns=("trusted_by_user_id",),
        export=False,
    ),
    TableTarget("community_listings", Match.USER_COLUMNS, columns=("owner_user_id",)),
    # --- mailbox --------------------------------------------------------------------------
    TableTarget("email_inbound_due_owners", Match.USER_ID, export=False),
    TableTarget("email_outbound_provider_index_repair_owners", Match.USER_ID, export=False),
    TableTarget(
        "email_outbound_provider_index",
        Match.USER_ID,
        export=False,
        note="operational reverse index; the Mailbox export keeps provider ids",
    ),
    TableTarget("email_inbox_addresses", Match.USER_ID),
    TableTarget("email_inboxes", Match.USER_ID),
    TableTarget("email_sender_identities", Match.USER_ID),
    TableTarget("email_sender_rules", Match.USER_ID),
    # --- jobs -----------------------------------------------------------------------------
    TableTarget("archived_job_artifacts", Match.USER_ID),
    TableTarget("jobs", Match.USER_ID, redact=("claim_token",)),
    # --- accounts (identity rows last: they hang off users.id) ----------------------------
    TableTarget("site_banner_dismissals", Match.DB_USER_ID),
    TableTarget("feature_flag_user_overrides", Match.DB_USER_ID),
    TableTarget("oauth_connections", Match.DB_USER_ID),
    TableTarget("passkeys", Match.DB_USER_ID, redact=("public_key",)),
    TableTarget("verifications", Match.DB_USER_TARGET, columns=("target",), redact=("secret",)),
    TableTarget("email_verifications", Match.DB_USER_ID, redact=("token_hash",)),
    TableTarget("pending_email_changes", Match.DB_USER_ID, redact=("token_hash",)),
    TableTarget("pending_email_claim_releases", Match.DB_USER_ID, redact=("token_hash",)),
    TableTarget("password_resets", Match.DB_USER_ID, redact=("token_hash",)),
    TableTarget("access_tokens", Match.DB_USER_ID, redact=("token_hash",)),
    # Two-factor (django-otp, ADR 0057): secrets and recovery codes are credentials; an
    # imported account sets two-factor up again.
    TableTarget(
        "otp_static_statictoken",
        Match.BUCKET_PARENT,
        columns=("device_id",),
        parent="otp_static_staticdevice",
        export=False,
        note="recovery codes (keyed digests only); credentials, never exported",
    ),
    TableTarget(
        "otp_static_staticdevice",
        Match.DB_USER_ID,
        export=False,
        note="the recovery-code holder; never exported",
    ),
    TableTarget(
        "otp_totp_totpdevice",
        Match.DB_USER_ID,
        export=False,
        note="authenticator secrets; credentials, never exported",
    ),
    # OAuth (docs/adr/0052): the mark step of deletion revokes every grant first
    # (apps.accounts.oauth.grants.revoke_all); these rows go with the one transaction.
    TableTarget(
        "oauth_grants",
        Match.DB_USER_ID,
        export=False,
        note="exported as the oauth_grants section (client, scopes, times; never a token)",
    ),
    TableTarget(
        "oauth2_provider_grant",
        Match.DB_USER_ID,
        export=False,
        note="short-lived authorization codes; credentials, never exported",
    ),
    TableTarget(
        "oauth2_provider_refreshtoken",
        Match.DB_USER_ID,
        export=False,
        note="refresh-token checksums and families; credentials, never exported",
    ),
    TableTarget(
        "oauth2_provider_accesstoken",
        Match.DB_USER_ID,
        export=False,
        note="access-token checksums; credentials, never exported",
    ),
    TableTarget(
        "oauth2_provider_idtoken",
        Match.DB_USER_ID,
        export=False,
        note="OpenID Connect is off; kept empty, declared for completeness",
    ),
    TableTarget(
        "oauth2_provider_devicegrant",
        Match.DB_USER_ID,
        export=False,
        note="the device flow is off; kept empty, declared for completeness",
    ),
    TableTarget(
        "user_email_claims",
        Match.DB_USER_ID,
        note="released once the account is gone, so the addresses can sign up again",
    ),
    # Django's auth M2M tables stand in for the original user_roles (db_user_id).
    TableTarget("users_groups", Match.DB_USER_ID),
    TableTarget("users_user_permissions", Match.DB_USER_ID),
    TableTarget(
        "users",
        Match.USER_COLUMNS,
        columns=("stable_user_id",),
        redact=("password_hash",),
        note="the account row itself, deleted last after every other target",
    ),
)

# Tables that carry a user-looking column but are not user data, each with the reason.
OPERATOR_OWNED_TABLES: tuple[ExcludedTable, ...] = (
    ExcludedTable(
        "account_deletions",
        "the deletion job's own ledger; it holds the subject's stable id only while the "
        "deletion runs and clears it on completion",
    ),
    # --- system_email ---------------------------------------------------------------------
    ExcludedTable(
        "system_email_threads",
        "operator-owned mail of the reserved platform locals; not user content",
    ),
    ExcludedTable(
        "system_email_messages",
        "operator-owned mail of the reserved platform locals; not user content",
    ),
    ExcludedTable(
        "system_email_attachments",
        "operator-owned mail of the reserved platform locals; not user content",
    ),
    ExcludedTable(
        "system_email_delivery_events",
        "operator-owned mail of the reserved platform locals; not user content",
    ),
)

# Tables with no owner at all (global config, ledgers, cursors). Listed so the guardrail can
# tell "forgotten" from "deliberately global".
GLOBAL_TABLES: tuple[ExcludedTable, ...] = (
    # --- accounts -------------------------------------------------------------------------
    ExcludedTable("audit_events", "hashed security audit trail in the audit DB; kept 180 days"),
    ExcludedTable("feature_flags", "global switches; updated_by is SET NULL by its foreign key"),
    ExcludedTable("invites", "signup invite codes; created_by is SET NULL by its foreign key"),
    ExcludedTable("platform_oauth_apps", "operator-provisioned built-in OAuth apps"),
    ExcludedTable(
        "oauth2_provider_application",
        "OAuth clients (dynamic registration, client ID metadata documents) shared by every "
        "person who connects them; user_id stays NULL: registration never attaches a session "
        "user (apps.accounts.oauth.views.Registration)",
    ),
    ExcludedTable("site_banners", "operator announcements; created_by/updated_by SET NULL"),
    ExcludedTable("platform_provider_marks", "operator-uploaded integration brand marks"),
    # --- entitlements ---------------------------------------------------------------------
    ExcludedTable("stripe_webhook_events", "Stripe idempotency ledger; kept 30 days"),
    ExcludedTable("d1_storage_reconcile_cursor", "singleton keyset cursor of a fleet lane"),
    # --- packages -------------------------------------------------------------------------
    ExcludedTable(
        "repo_session_storage_bucket_cursor",
        "platform-owned singleton keyset cursor of the repo-session storage sweep",
    ),
    ExcludedTable("integration_providers", "operator-curated registry of known OAuth providers"),
    # --- mailbox --------------------------------------------------------------------------
    ExcludedTable(
        "email_user_graph_authority",
        "permanent singleton marker gating user email writes; no owner",
    ),
    ExcludedTable(
        "email_delivery_alert_events",
        "short-lived provider bounce/complaint signals for operator alerts; owner_hash is a "
        "one-way hash, not a user id",
    ),
    # --- jobs -----------------------------------------------------------------------------
    ExcludedTable("jobs_worker_state", "operational key/value state of the job scheduler"),
    # --- system_email ---------------------------------------------------------------------
    ExcludedTable("system_email_daily_counters", "per reserved-local receive caps, not users"),
    ExcludedTable("system_email_graph_authority", "singleton authority marker for system mail"),
)


def target_tables() -> set[str]:
    return {target.table for target in USER_TABLE_TARGETS}


# The kernel's own tables that name a user: each is cleaned by the out-of-band step, never by
# the one-transaction table pass (the reason says by what).
KERNEL_TABLES: tuple[ExcludedTable, ...] = (
    ExcludedTable(
        "kody_user_schemas",
        "registry of per-user schemas; the mark step sets its deletion tombstone "
        "(kody.userschema.schemas.mark_deleting), purge_schema drops the user's schema in the "
        "out-of-band step and keeps the tombstone, finish_deletion removes the row at the end",
    ),
    ExcludedTable(
        "kody_schema_archives",
        "a hibernated user's per-user schema, packed (kody.userschema.hibernation); export "
        "restores it through the actor calls, purge_schema deletes it with the schema in the "
        "out-of-band step",
    ),
    ExcludedTable(
        "kody_vectors",
        "derived vectors; kody.vectors.index.delete_all_for_user (namespace and owner column) in "
        "the out-of-band step; rebuilt by reindex after an import",
    ),
)


def declared_tables() -> set[str]:
    return (
        target_tables()
        | {t.table for t in OPERATOR_OWNED_TABLES}
        | {t.table for t in GLOBAL_TABLES}
        | {t.table for t in KERNEL_TABLES}
    )
