"""Codemod runs: the packages in scope become items, and items are worked through one by one.

A run is created with one ``pending`` item per package in scope, then processed in item order.
Each item is settled on its own (its own commit through ``publish``, its own row update), so a
run cut off mid-way (a worker lost, an operator's stop) resumes by processing the items still
``pending``; settled items are never redone. An item is settled in one transaction with its
publish (the pointer and the item row commit together), under a row lock that a second worker
on the same run skips. Each commit's message names the run and item it came from.

Scan and dry run change nothing but the run's own rows; apply and revert write a new commit on
top of the branch head and publish it with the same checks as any save. A package whose new
files fail the checks is recorded ``failed`` with the failed checks, and stays as it was.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.packages.models import (
    EntitySource,
    PackageCodemodRun,
    PackageCodemodRunItem,
    SavedPackage,
)
from apps.packages.models.codemods import CodemodMode
from apps.packages.services.codemods import registry
from apps.packages.services.git import Author, commit_files, head, read_tree
from apps.packages.services.git.refs import HEAD_REF
from apps.packages.services.publish import PUBLISHED, publish
from kody.callers import account_policy
from kody.errors import Conflict, InvalidInput, NotFound
from kody.kv import keys as kv_keys

log = logging.getLogger(__name__)

# Run statuses.
PENDING, RUNNING, STOPPED, COMPLETE = "pending", "running", "stopped", "complete"
# Item statuses.
ITEM_PENDING = "pending"
APPLIES, NOT_APPLICABLE = "applies", "not_applicable"
WOULD_CHANGE, APPLIED, REVERTED = "would_change", "applied", "reverted"
FAILED, SKIPPED = "failed", "skipped"
SETTLED = (APPLIES, NOT_APPLICABLE, WOULD_CHANGE, APPLIED, REVERTED, FAILED, SKIPPED)

MAX_PACKAGES = 5000
MAX_DIFF_CHARS = 20_000
AUTHOR = Author("Kody codemods", "codemods@kody.invalid")


class RunNotFound(NotFound):
    code = "codemod_run_not_found"
    message = "No codemod run with that id."


class RunNotRevertible(Conflict):
    code = "codemod_run_not_revertible"
    message = "Only an apply run that has finished can be reverted, once."


def _marker(run_id: str, item_id: str) -> str:
    return f"Kody-Codemod-Run: {run_id}/{item_id}"


def candidates(
    *, scope_user_id: str | None, package_ids: list[str] | None, limit: int = MAX_PACKAGES
) -> list[SavedPackage]:
    rows = SavedPackage.objects.exclude(source_id="")
    if scope_user_id is not None:
        rows = rows.filter(user_id=scope_user_id)
    if package_ids:
        rows = rows.filter(id__in=package_ids)
    return list(rows.order_by("user_id", "name", "id")[:limit])


def start(
    codemod_id: str,
    mode: str,
    *,
    initiated_by: str,
    scope_user_id: str | None,
    package_ids: list[str] | None = None,
    limit: int = MAX_PACKAGES,
) -> PackageCodemodRun:
    """A run with one pending item per package in scope (nothing is read or written yet)."""
    registry.get(codemod_id)
    if mode not in (CodemodMode.SCAN, CodemodMode.DRY_RUN, CodemodMode.APPLY):
        raise InvalidInput("mode must be scan, dry_run or apply.")
    packages = candidates(scope_user_id=scope_user_id, package_ids=package_ids, limit=limit)
    if package_ids and len(packages) != len(set(package_ids)):
        missing = sorted(set(package_ids) - {p.id for p in packages})
        raise NotFound(
            "No such package in scope.",
            code="package_not_found",
            details={"packageIds": missing[:20]},
        )
    with transaction.atomic():
        run = PackageCodemodRun.objects.create(
            codemod_id=codemod_id,
            mode=mode,
            scope_user_id=scope_user_id,
            initiated_by_user_id=initiated_by,
            filters_json={"packageIds": package_ids or [], "limit": limit},
            status=PENDING,
        )
        PackageCodemodRunItem.objects.bulk_create(
            PackageCodemodRunItem(
                run_id=run.id,
                user_id=p.user_id,
                package_id=p.id,
                kody_id=p.kody_id or p.name,
                status=ITEM_PENDING,
            )
            for p in packages
        )
    return run


def start_revert(run: PackageCodemodRun, *, initiated_by: str) -> PackageCodemodRun:
    """A revert run over the original run's applied items."""
    with transaction.atomic():
        locked = PackageCodemodRun.objects.select_for_update().get(id=run.id)
        taken = PackageCodemodRun.objects.filter(revert_of_run_id=locked.id).exists()
        if locked.mode != CodemodMode.APPLY or locked.status != COMPLETE or taken:
            raise RunNotRevertible(details={"runId": locked.id, "status": locked.status})
        revert = PackageCodemodRun.objects.create(
            codemod_id=locked.codemod_id,
            mode=CodemodMode.REVERT,
            scope_user_id=locked.scope_user_id,
            initiated_by_user_id=initiated_by,
            filters_json={"revertOf": locked.id},
            status=PENDING,
            revert_of_run_id=locked.id,
        )
        applied = PackageCodemodRunItem.objects.filter(run_id=locked.id, status=APPLIED)
        PackageCodemodRunItem.objects.bulk_create(
            PackageCodemodRunItem(
                run_id=revert.id,
                user_id=i.user_id,
                package_id=i.package_id,
                kody_id=i.kody_id,
                status=ITEM_PENDING,
                before_commit=i.after_commit,  # what the apply left: revert only from there
                after_commit=None,
                revert_snapshot_key=i.revert_snapshot_key,
                findings_json=[{"restore": i.before_commit}],
            )
            for i in applied.order_by("id")
        )
    return revert


STALLED_AFTER = timedelta(minutes=10)


def stalled(*, limit: int) -> list[str]:
    """Runs pending or running with no progress for ``STALLED_AFTER`` (their worker is gone)."""
    cutoff = timezone.now() - STALLED_AFTER
    rows = PackageCodemodRun.objects.filter(status__in=(PENDING, RUNNING), updated_at__lt=cutoff)
    return list(rows.order_by("updated_at").values_list("id", flat=True)[:limit])


def stop(run: PackageCodemodRun) -> PackageCodemodRun:
    """Stop after the item in hand; ``resume`` picks up the pending rest."""
    PackageCodemodRun.objects.filter(id=run.id, status__in=(PENDING, RUNNING)).update(
        status=STOPPED, updated_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def resume(run: PackageCodemodRun) -> PackageCodemodRun:
    PackageCodemodRun.objects.filter(id=run.id, status=STOPPED).update(
        status=PENDING, updated_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def process(
    run_id: str,
    *,
    max_items: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PackageCodemodRun:
    """Work through the run's pending items (up to ``max_items``); a repeat is harmless."""
    claimed = PackageCodemodRun.objects.filter(id=run_id, status__in=(PENDING, RUNNING)).update(
        status=RUNNING, updated_at=timezone.now()
    )
    run = PackageCodemodRun.objects.get(id=run_id)
    if not claimed:
        return run
    codemod = registry.get(run.codemod_id)
    owners: dict[str, registry.Codemod] = {}
    done = 0
    while max_items is None or done < max_items:
        if should_stop is not None and should_stop():
            break
        current = PackageCodemodRun.objects.filter(id=run_id).values_list("status", flat=True)
        if current.first() != RUNNING:
            break  # stopped by an operator
        with transaction.atomic():
            # Locked for the item's whole settlement: a second worker on the same run takes
            # the next item instead, and the item's row commits with its publish or not at all.
            item = (
                PackageCodemodRunItem.objects.select_for_update(skip_locked=True)
                .filter(run_id=run_id, status=ITEM_PENDING)
                .order_by("id")
                .first()
            )
            if item is None:
                if not PackageCodemodRunItem.objects.filter(
                    run_id=run_id, status=ITEM_PENDING
                ).exists():
                    PackageCodemodRun.objects.filter(id=run_id, status=RUNNING).update(
                        status=COMPLETE, updated_at=timezone.now()
                    )
                break
            if item.user_id not in owners:
                owners[item.user_id] = codemod.for_owner(item.user_id)
            try:
                with transaction.atomic():
                    _settle(run, item, owners[item.user_id])
            except Exception as exc:  # one package's trouble never stops the others
                log.warning("codemod %s item %s failed: %s", run_id, item.id, type(exc).__name__)
                item.status, item.error = FAILED, _error_text(exc)
            item.save()
            PackageCodemodRun.objects.filter(id=run_id).update(updated_at=timezone.now())
        done += 1
    run.refresh_from_db()
    return run


def _error_text(exc: Exception) -> str:
    code = getattr(exc, "code", None)
    return str(code) if code else type(exc).__name__


def _settle(run: PackageCodemodRun, item: PackageCodemodRunItem, codemod: registry.Codemod) -> None:
    package = SavedPackage.objects.filter(user_id=item.user_id, id=item.package_id).first()
    source = (
        EntitySource.objects.filter(user_id=item.user_id, id=package.source_id).first()
        if package
        else None
    )
    if package is None or source is None:
        item.status, item.error = SKIPPED, "package_gone"
        return
    if not source.published_commit:
        item.status, item.error = SKIPPED, "not_published"
        return
    if run.mode == CodemodMode.REVERT:
        _revert_item(run, item, package, source)
        return
    published = source.published_commit
    files = read_tree(source.repo_id, published)
    if not codemod.applies(files):
        item.status = NOT_APPLICABLE
        return
    new = codemod.rewrite(files)
    changed = sorted(p for p in set(files) | set(new) if files.get(p) != new.get(p))
    item.changed_paths_json = changed
    if run.mode == CodemodMode.SCAN:
        item.status = APPLIES
        return
    if run.mode == CodemodMode.DRY_RUN:
        item.status = WOULD_CHANGE
        item.findings_json = [{"path": p, "diff": _diff(p, files, new)} for p in changed]
        return
    tip = head(source.repo_id)
    if tip != published:
        # Commits on the branch that are not published yet: the rewrite would drop or bury them.
        item.status, item.error, item.before_commit = SKIPPED, "unpublished_changes", published
        return
    item.before_commit = published
    item.revert_snapshot_key = kv_keys.source_snapshot(source.id, published)
    message = f"codemod {codemod.id}\n\n{_marker(run.id, item.id)}\n"
    _publish_item(item, package, source, new, parent=published, message=message)
    if item.status == APPLIED:
        item.after_commit = source.published_commit


def _revert_item(
    run: PackageCodemodRun, item: PackageCodemodRunItem, package: SavedPackage, source: Any
) -> None:
    restore = (item.findings_json or [{}])[0].get("restore")
    published = source.published_commit
    if published != item.before_commit:
        # Changed after the apply: restoring would throw that work away.
        item.status, item.error = SKIPPED, "changed_since_apply"
        return
    if not restore or head(source.repo_id) != published:
        item.status, item.error = SKIPPED, "unpublished_changes"
        return
    files = read_tree(source.repo_id, restore)
    current = read_tree(source.repo_id, published)
    item.changed_paths_json = sorted(
        p for p in set(files) | set(current) if files.get(p) != current.get(p)
    )
    message = f"revert codemod {run.codemod_id}\n\n{_marker(run.id, item.id)}\n"
    _publish_item(item, package, source, files, parent=published, message=message)
    if item.status == APPLIED:
        item.status, item.after_commit = REVERTED, source.published_commit


def _publish_item(
    item: PackageCodemodRunItem,
    package: SavedPackage,
    source: EntitySource,
    files: dict[str, bytes],
    *,
    parent: str,
    message: str,
) -> None:
    from apps.accounts.models import User

    owner = User.objects.get(stable_user_id=item.user_id)
    # The owner's write lease, as for any write to their account: refused once deleting.
    with account_policy().write_guard(owner, "codemod:publish"):
        commit = commit_files(source.repo_id, files, parent=parent, message=message, author=AUTHOR)
        result = publish(owner, source, package, commit, ref_update=(HEAD_REF, parent, commit))
    item.check_summary_json = {
        "status": result.status,
        "failed": [c for c in result.checks if not c["ok"]],
        "passed": [c["name"] for c in result.checks if c["ok"]],
    }
    if result.status == PUBLISHED:
        item.status = APPLIED
    else:
        # Nothing moved: the commit object is unreachable and the package is as it was.
        item.status, item.error = FAILED, result.reason or "rejected"


def _diff(path: str, before: dict[str, bytes], after: dict[str, bytes]) -> str:
    old = before.get(path, b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = after.get(path, b"").decode("utf-8", "replace").splitlines(keepends=True)
    text = "".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))
    return text[:MAX_DIFF_CHARS]


def summary(run: PackageCodemodRun) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for status in PackageCodemodRunItem.objects.filter(run_id=run.id).values_list(
        "status", flat=True
    ):
        counts[status] = counts.get(status, 0) + 1
    return {
        "id": run.id,
        "codemodId": run.codemod_id,
        "mode": run.mode,
        "status": run.status,
        "revertOfRunId": run.revert_of_run_id,
        "counts": counts,
        "createdAt": run.created_at.isoformat(),
        "updatedAt": run.updated_at.isoformat(),
    }


def item_view(item: PackageCodemodRunItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "packageId": item.package_id,
        "kodyId": item.kody_id,
        "status": item.status,
        "beforeCommit": item.before_commit,
        "afterCommit": item.after_commit,
        "changedPaths": list(item.changed_paths_json),
        "findings": list(item.findings_json),
        "checks": dict(item.check_summary_json),
        "error": item.error,
    }
