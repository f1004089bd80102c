"""``publishFromExternalRef``: the one publish every path uses (save, external push,
reconcile, repo promotion; repo sessions next).

Order (seed 000): checks on the commit's files before any mutation → advance
``entity_sources.published_commit`` (and, for a save, the branch ref, in the same transaction)
→ write the source and manifest snapshots to KV → refresh the projections (saved package row,
bundle artifacts and their KV keys, search vectors). KV lives in Postgres here, so a failed
snapshot write rolls the pointer back with the rest of the transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts import policy
from apps.packages.models import EntitySource, PublishedBundleArtifact, SavedPackage
from apps.packages.services import index_debt, run_history, scope_grants, sources
from apps.packages.services.checks import CheckReport, run_checks
from apps.packages.services.git import BucketObjectStore, is_ancestor, move_refs, read_tree
from kody.errors import Conflict, KodyError
from kody.kv import keys as kv_keys
from kody.kv import store as kv

log = logging.getLogger(__name__)

PUBLISHED, ALREADY, REJECTED = "published", "already_published", "rejected"
README_IN_SEARCH = 2000


class PackageNameTaken(Conflict):
    code = "package_name_taken"
    message = "You already have another package with that name."


class SnapshotWriteFailed(KodyError):
    code = "snapshot_write_failed"
    status = 503
    message = "The published snapshot could not be stored; nothing was published. Try again."


class PublishRaced(Conflict):
    code = "publish_raced"
    message = "Another publish of this package finished first; read it and try again."


@dataclass
class PublishResult:
    status: str
    published_commit: str | None
    checks: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "publishedCommit": self.published_commit,
            "checks": self.checks,
        }


def publish(
    user: Any,
    source: EntitySource,
    package: SavedPackage,
    commit: str,
    *,
    allow_force: bool = False,
    approved: bool = False,
    ref_update: tuple[str, str | None, str] | None = None,
    files: dict[str, bytes] | None = None,
    report: CheckReport | None = None,
) -> PublishResult:
    if source.published_commit == commit and ref_update is None:
        return PublishResult(ALREADY, commit)
    if package.locked_at is not None and not approved:
        return PublishResult(
            REJECTED,
            source.published_commit,
            [{"name": "locked", "ok": False, "message": "The owner must approve this commit."}],
            reason="locked",
        )
    store = BucketObjectStore(source.repo_id)
    if files is None:
        files = read_tree(source.repo_id, commit, store=store)
    if report is None:
        report = run_checks(user.stable_user_id, user.username, files, package_id=package.id)
    if report.ok and report.manifest is not None:
        # package.json#kody.jobs is synced after the publish: refuse bad entries first.
        wrong = run_history.package_jobs().problems(report.manifest.jobs, report.manifest.exports)
        report.add("jobs", not wrong, " ".join(wrong))
    if not report.ok:
        return PublishResult(REJECTED, source.published_commit, report.checks, reason="checks")
    if report.manifest is not None:
        # Publishing under a platform account's scope needs a standing grant, re-checked on
        # every publish so a revoked grant stops the next one (coded 403, nothing changes).
        scope_grants.check_publish(user.stable_user_id, user.username, report.manifest.scope)
    previous = source.published_commit
    if previous and not allow_force and not is_ancestor(store, previous, commit):
        checks = [
            *report.checks,
            {
                "name": "fast_forward",
                "ok": False,
                "message": f"{commit[:12]} does not descend from the published {previous[:12]}; "
                "pass allowForce to publish it anyway.",
            },
        ]
        return PublishResult(REJECTED, previous, checks, reason="non_fast_forward")
    # The published tree counts against storage_bytes. Its growth is held in the meter while
    # the publish runs (an atomic check: over the limit this raises the coded limit error
    # before anything moves); the tree's inventory row then carries the bytes, and the hold
    # is given back.
    size = sources.tree_bytes(files)
    grown = size - sources.recorded_bytes(source.user_id, source.id)
    policy.reserve_storage_bytes(source.user_id, grown)
    try:
        with transaction.atomic():
            locked = EntitySource.objects.select_for_update().get(id=source.id)
            if locked.published_commit == commit:
                return PublishResult(ALREADY, commit, report.checks)
            if locked.published_commit != previous:
                raise PublishRaced(details={"publishedCommit": locked.published_commit})
            if ref_update is not None:
                move_refs(locked.repo_id, [ref_update])
            now = timezone.now()
            locked.published_commit = locked.indexed_commit = commit
            locked.last_external_check_at = now
            locked.external_check_until = None  # a publish settles the pending horizon
            locked.save()
            try:
                _write_snapshots(locked, commit, files, report)
            except Exception as exc:
                # Raising inside the transaction rolls the pointer (and a save's ref) back.
                log.warning("snapshot write for %s failed: %s", locked.id, type(exc).__name__)
                raise SnapshotWriteFailed() from exc
            _refresh_projections(user.stable_user_id, locked, package, commit, files, report)
            sources.record_bytes(locked.user_id, locked.id, size)
    finally:
        policy.release_storage_bytes(source.user_id, grown)
    source.published_commit = commit
    _sync_jobs(user.stable_user_id, package, commit, report)
    return PublishResult(PUBLISHED, commit, report.checks)


def _sync_jobs(user_id: str, package: SavedPackage, commit: str, report: CheckReport) -> None:
    assert report.manifest is not None
    kody_id = package.kody_id or report.manifest.name
    run_history.package_jobs().sync(user_id, package.id, kody_id, commit, report.manifest.jobs)


def _write_snapshots(
    source: EntitySource, commit: str, files: dict[str, bytes], report: CheckReport
) -> None:
    texts = {}
    for path, data in files.items():
        try:
            texts[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # binary assets stay in git; the snapshot carries source text
    assert report.manifest is not None
    kv.put_json(
        kv_keys.source_snapshot(source.id, commit),
        {"sourceId": source.id, "commit": commit, "files": texts},
    )
    kv.put_json(
        kv_keys.source_manifest_snapshot(source.id, commit),
        {**report.manifest.snapshot(), "dependencies": report.dependencies, "commit": commit},
    )


def _refresh_projections(
    user_id: str,
    source: EntitySource,
    package: SavedPackage,
    commit: str,
    files: dict[str, bytes],
    report: CheckReport,
) -> None:
    manifest = report.manifest
    assert manifest is not None
    readme = files.get("README.md", b"").decode("utf-8", "replace")[:README_IN_SEARCH]
    package.name = package.kody_id = manifest.name
    package.description = manifest.description
    package.tags_json = manifest.tags
    package.search_text = f"{manifest.description}\n{manifest.category}\n{readme}".strip()
    package.has_app = manifest.app is not None
    package.source_id = source.id
    try:
        with transaction.atomic():
            package.save()
    except IntegrityError as exc:
        raise PackageNameTaken(details={"name": manifest.name}) from exc
    for export_key, bundle in report.bundles.items():
        entry = manifest.exports[export_key]
        key = kv_keys.bundle_artifact(source.id, commit, "export", export_key, entry)
        kv.put(key, bundle)
        deps = list(report.dependencies)
        row = PublishedBundleArtifact.objects.filter(
            Q(artifact_name=export_key),
            user_id=user_id,
            source_id=source.id,
            artifact_kind="export",
            entry_point=entry,
        ).first()
        if row is None:
            row = PublishedBundleArtifact(
                user_id=user_id,
                source_id=source.id,
                artifact_kind="export",
                artifact_name=export_key,
                entry_point=entry,
            )
        if row.kv_key and row.kv_key != key:
            kv.delete(row.kv_key)  # the identity row retargets; its old bundle goes with it
        row.published_commit, row.kv_key, row.dependencies_json = commit, key, deps
        row.save()
    index_debt.changed("package", user_id, [package.id])
