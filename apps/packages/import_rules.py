"""What imported package rows may not bring (``apps.accounts.importing``).

A row that names a KV or blob key gets the key its builder makes from the row's own ids;
a key in the archive that differs from it refuses the import (it could name another
account's entry, which retention or deletion of this account would then remove).
"""

from __future__ import annotations

from typing import Any

from apps.accounts.importing import ImportContext, ImportRefused, import_rule
from kody.kv import keys


@import_rule("published_bundle_artifacts")
def bundle_artifact(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    source = values.get("source_id")
    if source not in ctx.archive_values("entity_sources", "id"):
        raise ImportRefused("a published_bundle_artifacts row names a source not in the export")
    try:
        rebuilt = keys.bundle_artifact(
            str(source),
            str(values.get("published_commit") or ""),
            str(values.get("artifact_kind") or ""),
            values.get("artifact_name"),
            str(values.get("entry_point") or ""),
        )
    except keys.BadKeySegment as exc:
        raise ImportRefused(f"published_bundle_artifacts: {exc}") from exc
    if values.get("kv_key") != rebuilt:
        raise ImportRefused(
            "published_bundle_artifacts.kv_key is not the key its builder makes from the row"
        )
    values["kv_key"] = rebuilt
    return values


@import_rule("package_codemod_run_items")
def codemod_item(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    # A snapshot of the old instance; its key means nothing here.
    values["revert_snapshot_key"] = None
    return values


@import_rule("entity_source_artifacts_push_subscriptions")
def push_subscription(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    # A subscription follows pushes to a repo: only to the repo of one of the account's sources.
    sources = {row.get("id"): row.get("repo_id") for row in ctx.archive.rows("entity_sources")}
    if sources.get(values.get("source_id"), object()) != values.get("repo_id"):
        raise ImportRefused(
            "a push subscription names a repo that is not its source's in the export"
        )
    return values


@import_rule("user_integrations")
def integration(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    # Tokens are secrets and never leave in an export: the imported connection is pending
    # until the person connects it again.
    values["access_token_secret_name"] = ""
    values["refresh_token_secret_name"] = ""
    values["connected_at"] = None
    values["token_refreshed_at"] = None
    return values


@import_rule("user_oauth_apps")
def oauth_app(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    # The client secret did not leave either; the person sets it again (rotate credentials).
    values["client_secret_secret_name"] = ""
    return values
