"""Every user-owned surface outside the database's tables: the per-user schema, vectors, blob
prefixes and KV key families (the tables are in ``apps.accounts.surfaces``).

Deletion sweeps each declared prefix for the user and export copies those marked ``export``;
``tests/accounts/test_surfaces_guardrail.py`` fails when a key scheme in ``kody.blobs.keys`` is
not declared here.
"""

from __future__ import annotations

from apps.accounts.surface_kinds import OutOfBandSurface

OUT_OF_BAND_SURFACES: tuple[OutOfBandSurface, ...] = (
    # --- kernel ---------------------------------------------------------------------------
    OutOfBandSurface(
        "actor",
        "user_schema",
        export=False,
        note="the user's per-user schema and its kody_user_schemas row; dropped by "
        "kody.userschema.schemas.purge_schema after each actor app has exported its tables",
    ),
    OutOfBandSurface(
        "actor",
        "repo_session",
        export=False,
        note="RepoSession workspaces (a session's changed files, keyed by session id) are "
        "ephemeral editing scratch, not portable: the repo_session_index section exports the "
        "catalog, and the sources themselves are exported as artifact_repos",
    ),
    OutOfBandSurface(
        "vectors",
        "kody_vectors",
        export=False,
        note="derived from source rows, rebuilt by reindexing; kody.vectors.index."
        "delete_all_for_user removes the user's namespace",
    ),
    # --- blob prefixes (``extra["bucket"]`` names the bucket; keys from kody.blobs.keys) --
    OutOfBandSurface(
        "blob_prefix",
        "email-raw:v1:{userId}/",
        export=True,
        note="raw MIME of the user's messages; listed by Mailbox.blob_references, then the "
        "prefix is swept (kody.blobs.purge_prefix) as defence in depth",
        extra={"bucket": "email_blobs"},
    ),
    OutOfBandSurface(
        "blob_prefix",
        "email-attachment:v1:{userId}/",
        export=True,
        note="attachments stored outside the raw MIME",
        extra={"bucket": "email_blobs"},
    ),
    OutOfBandSurface(
        "blob_prefix",
        "{userId}/",
        export=True,
        note="the user's avatars (user-avatars/{userId}/ inside community assets)",
        extra={"bucket": "user_avatars"},
    ),
    OutOfBandSurface(
        "blob_prefix",
        "community-icon:v3/{listingId}/",
        export=True,
        note="icons of the user's own community listings (and older key versions)",
        extra={"bucket": "community_assets", "scope": "community_listings.owner_user_id"},
    ),
    # Per-listing KV (BUNDLE_ARTIFACTS_KV): the public snapshot and the icon descriptors of
    # each of the user's own listings, older descriptor versions included; not exported.
    OutOfBandSurface(
        "listing_kv_prefix",
        "community-snapshot:v1:{listingId}",
        export=False,
        note="public listing snapshot (one key per listing)",
    ),
    *(
        OutOfBandSurface(
            "listing_kv_prefix",
            f"derived-cache:v1:community-icon:{version}:{{listingId}}:",
            export=False,
            note="icon descriptors of the user's listings",
        )
        for version in ("v1", "v2", "v3")
    ),
    OutOfBandSurface(
        "blob_prefix",
        "identity-icon:v1/{repoId}/",
        export=True,
        note="identity icons of the user's repos",
        extra={"bucket": "community_assets", "scope": "entity_sources.repo_id"},
    ),
    OutOfBandSurface(
        "blob_prefix",
        "{repoId}/",
        export=False,
        note="git objects and packs of the user's repos; exported as one git bundle per repo "
        "(export_account's repos/) with refs in the artifact_repos section",
        extra={"bucket": "source_repos", "scope": "entity_sources.repo_id"},
    ),
    # Per-source KV families (BUNDLE_ARTIFACTS_KV): derived from published git source, deleted
    # for every entity_sources row of the user; not exported (the git bundles are the source).
    OutOfBandSurface(
        "repo_kv_prefix",
        "source-snapshot:v1:{sourceId}:",
        export=False,
        note="published source snapshots",
    ),
    OutOfBandSurface(
        "repo_kv_prefix",
        "source-manifest-snapshot:v1:{sourceId}:",
        export=False,
        note="published manifest snapshots",
    ),
    OutOfBandSurface(
        "repo_kv_prefix",
        "bundle-artifact:v1:{sourceId}:",
        export=False,
        note="bundle artifacts (rows in published_bundle_artifacts)",
    ),
    OutOfBandSurface(
        "repo_kv_prefix",
        "derived-cache:v1:identity-icon:v1:{repoId}:",
        export=False,
        note="derived list-mark cache of the user's repos",
    ),
    OutOfBandSurface(
        "blob_prefix",
        "repo-session:{sessionId}/",
        export=False,
        note="ephemeral editing-session spill bytes; not portable, deleted with the session "
        "(deletion lists the sessions from RepoSessionIndex.blob_prefixes, failing closed)",
        extra={"bucket": "repo_session_blobs", "scope": "repo sessions of the user"},
    ),
    OutOfBandSurface(
        "kv_prefix",
        "package-retriever-manifest:v1:{userId}:",
        export=False,
        note="derived retriever index; kody.kv.store.delete_user_keys",
    ),
    OutOfBandSurface(
        "kv_prefix",
        "package-retriever-index-entry:v1:{userId}:",
        export=False,
        note="derived retriever index; kody.kv.store.delete_user_keys",
    ),
)


def declared_prefixes(kind: str) -> list[str]:
    """Declared key families of ``kind`` (``blob_prefix`` or ``kv_prefix``), placeholders kept."""
    return [surface.name for surface in OUT_OF_BAND_SURFACES if surface.kind == kind]
