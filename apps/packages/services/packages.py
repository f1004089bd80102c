"""Saved packages: a repo whose ``package.json`` is authoritative, plus publish semantics.

Every read and write is scoped by the owner; another user's package id is "not found".
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.entitlements.services import assert_within
from apps.packages.models import (
    EntitySource,
    PackageInvocationToken,
    PackageKodyIdRedirect,
    SavedPackage,
    UserRepo,
)
from apps.packages.models.sources import EntityKind
from apps.packages.services import index_debt, repos, sources
from apps.packages.services.checks import run_checks
from apps.packages.services.git import DEFAULT_BRANCH, Author, commit_files, head, read_tree
from apps.packages.services.git.objects import repo_prefix
from apps.packages.services.git.receive import MAX_FILE_BYTES
from apps.packages.services.git.refs import HEAD_REF
from apps.packages.services.publish import REJECTED, PublishResult, publish
from kody.blobs import purge_prefix
from kody.errors import InvalidInput, KodyError, NotFound

MAX_FILES = 1000


class PackageNotFound(NotFound):
    code = "package_not_found"
    message = "No package with that id."


class ChecksFailed(KodyError):
    code = "checks_failed"
    status = 422
    message = "The package did not pass its publish checks; nothing was changed."


def head_of(source: EntitySource) -> str | None:
    return head(source.repo_id)


def to_json(package: SavedPackage, source: EntitySource | None = None) -> dict[str, Any]:
    source = source or EntitySource.objects.filter(id=package.source_id).first()
    return {
        "id": package.id,
        "name": package.name,
        "sourceId": package.source_id,
        "publishedCommit": source.published_commit if source else None,
        "description": package.description,
        "tags": list(package.tags_json),
        "hidden": package.hidden,
        "isPrivate": package.is_private,
        "locked": package.locked_at is not None,
        "hasApp": package.has_app,
        "defaultBranch": DEFAULT_BRANCH,
        "updatedAt": package.updated_at.isoformat(),
    }


def owned(user_id: str, package_id: str | None = None, name: str | None = None) -> SavedPackage:
    rows = SavedPackage.objects.filter(user_id=user_id)
    found = None
    if package_id:
        found = rows.filter(id=package_id).first()
    elif name:
        found = rows.filter(Q(name=name) | Q(kody_id=name)).first()
        if found is None:
            moved = PackageKodyIdRedirect.objects.filter(user_id=user_id, old_kody_id=name).first()
            found = rows.filter(id=moved.package_id).first() if moved else None
    if found is None:
        raise PackageNotFound(details={"packageId": package_id, "name": name})
    return found


def source_of(package: SavedPackage) -> EntitySource:
    return EntitySource.objects.get(user_id=package.user_id, id=package.source_id)


def _author(user: Any) -> Author:
    name = (getattr(user, "display_name", "") or user.username).strip() or "Kody user"
    return Author(name, user.email)


def _files(files: dict[str, str]) -> dict[str, bytes]:
    if not files:
        raise InvalidInput("files must hold at least package.json and README.md.")
    if len(files) > MAX_FILES:
        raise InvalidInput(f"A package holds at most {MAX_FILES} files.")
    out = {}
    for path, text in files.items():
        parts = path.split("/")
        if path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts):
            raise InvalidInput(
                "File paths are relative, without '.', '..' or '.git'.",
                details={"path": path[:200]},
            )
        data = text.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise InvalidInput("A file is at most 10 MiB.", details={"path": path[:200]})
        out[path] = data
    return out


def _refuse(report_checks: list[dict[str, Any]]) -> ChecksFailed:
    return ChecksFailed(
        details={"checks": report_checks, "failed": [c for c in report_checks if not c["ok"]]}
    )


def save(user: Any, files: dict[str, str], package_id: str | None = None) -> dict[str, Any]:
    data = _files(files)
    uid = user.stable_user_id
    package = owned(uid, package_id) if package_id else None
    report = run_checks(uid, user.username, data, package_id=package.id if package else None)
    if not report.ok:
        raise _refuse(report.checks)
    if package is None:
        # COUNT-LIMIT SITE (saved_packages): the plain count check; switch to the atomic
        # count-limit mechanism of apps/entitlements once it lands.
        assert_within(uid, "saved_packages")
        if SavedPackage.objects.filter(user_id=uid, name=report.manifest.name).exists():
            raise InvalidInput(
                f"You already have {report.manifest.name}; pass its packageId to update it.",
                code="package_name_taken",
                status=409,
            )
    created_repo: str | None = None
    try:
        with transaction.atomic():
            if package is None:
                package = SavedPackage(
                    user_id=uid,
                    name=report.manifest.name,
                    kody_id=report.manifest.name,
                    source_id="",
                )
                source = sources.create_source(uid, EntityKind.PACKAGE, package.id)
                created_repo = source.repo_id
                package.source_id = source.id
                package.save()
            else:
                source = source_of(package)
            parent = head(source.repo_id)
            commit = commit_files(
                source.repo_id,
                data,
                parent=parent,
                message="Save package via packageSave",
                author=_author(user),
            )
            result = publish(
                user,
                source,
                package,
                commit,
                approved=False,
                ref_update=(HEAD_REF, parent, commit),
                files=data,
                report=report,
            )
            if result.status == REJECTED:
                raise _refuse(result.checks)
    except IntegrityError as exc:
        _drop_blobs(created_repo)
        raise InvalidInput(
            "That package name is taken.", code="package_name_taken", status=409
        ) from exc
    except BaseException:
        _drop_blobs(created_repo)
        raise
    return {
        "package": {
            "id": package.id,
            "name": package.name,
            "sourceId": source.id,
            "publishedCommit": result.published_commit,
        },
        "checks": result.checks,
    }


def _drop_blobs(repo_id: str | None) -> None:
    if repo_id:
        purge_prefix(sources.BUCKET, repo_prefix(repo_id))


def list_page(
    user_id: str, *, query: str | None = None, limit: int = 50, cursor: str | None = None
) -> dict[str, Any]:
    limit = max(1, min(limit, repos.MAX_PAGE))
    rows = SavedPackage.objects.filter(user_id=user_id).order_by("name", "id")
    if query:
        rows = rows.filter(Q(name__icontains=query) | Q(description__icontains=query))
    after = repos.decode_cursor(cursor, 2)
    if after:
        rows = rows.filter(Q(name__gt=after[0]) | Q(name=after[0], id__gt=after[1]))
    page = list(rows[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    by_id = {
        s.id: s
        for s in EntitySource.objects.filter(user_id=user_id, id__in=[p.source_id for p in page])
    }
    return {
        "packages": [to_json(p, by_id.get(p.source_id)) for p in page],
        "nextCursor": repos.encode_cursor(page[-1].name, page[-1].id) if more else None,
    }


def update(
    user_id: str,
    package_id: str,
    *,
    hidden: bool | None = None,
    is_private: bool | None = None,
    locked: bool | None = None,
) -> SavedPackage:
    with transaction.atomic():
        package = (
            SavedPackage.objects.select_for_update().filter(user_id=user_id, id=package_id).first()
        )
        if package is None:
            raise PackageNotFound(details={"packageId": package_id})
        if hidden is not None:
            package.hidden = hidden
        if is_private is not None:
            package.is_private = is_private
        if locked is not None:
            package.locked_at = (package.locked_at or timezone.now()) if locked else None
        package.save()
        index_debt.changed("package", user_id, [package.id])
    return package


def delete(user_id: str, package_id: str) -> None:
    package = owned(user_id, package_id)
    source = EntitySource.objects.filter(user_id=user_id, id=package.source_id).first()
    with transaction.atomic():
        PackageInvocationToken.objects.filter(user_id=user_id, package_id=package.id).delete()
        PackageKodyIdRedirect.objects.filter(user_id=user_id, package_id=package.id).delete()
        SavedPackage.objects.filter(id=package.id, user_id=user_id).delete()
        index_debt.changed("package", user_id, [package.id])
        if source is not None:
            sources.purge(source)


def publish_external_push(
    user: Any, package_id: str, *, allow_force: bool = False, approved: bool = False
) -> PublishResult:
    package = owned(user.stable_user_id, package_id)
    source = source_of(package)
    current = head(source.repo_id)
    if current is None:
        return PublishResult(
            REJECTED,
            source.published_commit,
            [{"name": "head", "ok": False, "message": "The default branch has no commits."}],
        )
    return publish(user, source, package, current, allow_force=allow_force, approved=approved)


def promote_repo(user: Any, repo_id: str) -> dict[str, Any]:
    uid = user.stable_user_id
    repo, source = repos.get(uid, repo_id)
    current = head(source.repo_id)
    if current is None:
        raise _refuse(
            [
                {
                    "name": "head",
                    "ok": False,
                    "message": "Push a commit with package.json and README.md first.",
                }
            ]
        )
    files = read_tree(source.repo_id, current)
    report = run_checks(uid, user.username, files)
    if not report.ok:
        raise _refuse(report.checks)
    # COUNT-LIMIT SITE (saved_packages): see save().
    assert_within(uid, "saved_packages")
    try:
        with transaction.atomic():
            package = SavedPackage.objects.create(
                user_id=uid,
                name=report.manifest.name,
                kody_id=report.manifest.name,
                source_id=source.id,
                description=repo.description,
            )
            EntitySource.objects.filter(id=source.id).update(
                entity_kind=EntityKind.PACKAGE, entity_id=package.id
            )
            UserRepo.objects.filter(id=repo.id, user_id=uid).delete()
            source.refresh_from_db()
            result = publish(user, source, package, current, files=files, report=report)
            if result.status == REJECTED:
                raise _refuse(result.checks)
    except IntegrityError as exc:
        raise InvalidInput(
            "You already have a package with that name.", code="package_name_taken", status=409
        ) from exc
    return {"package": {**to_json(package, source)}, "checks": result.checks}


def git_remote(user: Any, package_id: str, access: str = "read") -> dict[str, Any]:
    package = owned(user.stable_user_id, package_id)
    folder = package.name.rsplit("/", 1)[-1] or "package"
    return repos.git_remote(user, source_of(package), access, folder=folder)


def invocation_tokens(user_id: str, package_id: str | None = None) -> list[dict[str, Any]]:
    rows = PackageInvocationToken.objects.filter(user_id=user_id).order_by("-created_at")
    if package_id:
        owned(user_id, package_id)
        rows = rows.filter(package_id=package_id)
    return [token_json(t) for t in rows[:200]]


def token_json(t: PackageInvocationToken) -> dict[str, Any]:
    return {
        "id": t.id,
        "packageId": t.package_id,
        "name": t.name,
        "exportNames": list(t.export_names_json),
        "email": t.email,
        "displayName": t.display_name,
        "lastUsedAt": t.last_used_at.isoformat() if t.last_used_at else None,
        "revokedAt": t.revoked_at.isoformat() if t.revoked_at else None,
        "createdAt": t.created_at.isoformat(),
    }


def invocation_token(user_id: str, token_id: str) -> dict[str, Any]:
    row = PackageInvocationToken.objects.filter(user_id=user_id, id=token_id).first()
    if row is None:
        raise NotFound(
            "No invocation token with that id.",
            code="invocation_token_not_found",
            details={"tokenId": token_id},
        )
    return token_json(row)
