"""Codemod capabilities: the owner's (domain ``packages``, their own packages only) and the
operator's (domain ``admin``, any account's packages, audited).

Scan and dry run settle their first items in the call and change nothing but the run's rows
(the operator's forms still write their audit intent first, as every operator write does);
apply and revert are worked by a task (and resumed by the ``codemod_runs`` lane), so the reply
is the run as started: read its items back with ``packageCodemodList`` and ``runId``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.accounts.services import audit
from apps.accounts.services.lookup import account_by_stable_id
from apps.packages.models import PackageCodemodRun, PackageCodemodRunItem
from apps.packages.models.codemods import CodemodMode
from apps.packages.services.codemods import registry, runs
from kody.capabilities import Context, capability

ID = {"type": "string", "minLength": 1, "maxLength": 64}
# The registered codemods, stated in the schema (an id the registry lacks is no valid input).
CODEMOD = {"type": "string", "enum": sorted(registry.CODEMODS)}
# Package ids are UUIDs; the pattern says so loosely (letters, digits, ``._:-``).
PACKAGE_ID = {**ID, "pattern": r"^[A-Za-z0-9._:-]+$"}
PACKAGE_IDS = {
    "type": "array",
    "items": PACKAGE_ID,
    "minItems": 1,
    "maxItems": 500,
    "uniqueItems": True,
}
INLINE_ITEMS = 200
MAX_ITEMS_SHOWN = 500


def _start_props(admin: bool) -> dict[str, Any]:
    props: dict[str, Any] = {"codemodId": CODEMOD, "packageIds": PACKAGE_IDS}
    if admin:
        props["userId"] = ID
        props["limit"] = {"type": "integer", "minimum": 1, "maximum": runs.MAX_PACKAGES}
    return {
        "type": "object",
        "properties": props,
        "required": ["codemodId"],
        "additionalProperties": False,
    }


def _items(run: PackageCodemodRun, user_id: str | None) -> list[dict[str, Any]]:
    rows = PackageCodemodRunItem.objects.filter(run_id=run.id)
    if user_id is not None:
        rows = rows.filter(user_id=user_id)
    return [runs.item_view(i) for i in rows.order_by("id")[:MAX_ITEMS_SHOWN]]


def _inline(run: PackageCodemodRun, user_id: str | None) -> dict[str, Any]:
    """Scan/dry run: settle up to ``INLINE_ITEMS`` now; a task takes any rest."""
    run = runs.process(run.id, max_items=INLINE_ITEMS)
    if run.status == runs.RUNNING:
        _enqueue(run)
    return {"run": runs.summary(run), "items": _items(run, user_id)}


def _enqueue(run: PackageCodemodRun) -> None:
    from apps.packages.tasks import process_codemod_run

    run_id = run.id
    transaction.on_commit(lambda: process_codemod_run.delay(run_id))


def _scope(ctx: Context, userId: str | None) -> str | None:  # noqa: N803
    return account_by_stable_id(userId).stable_user_id if userId else None


def _owned_run(ctx: Context, run_id: str) -> PackageCodemodRun:
    run = PackageCodemodRun.objects.filter(
        id=run_id, scope_user_id=ctx.user_id, initiated_by_user_id=ctx.user_id
    ).first()
    if run is None:
        raise runs.RunNotFound(details={"runId": run_id})
    return run


# The owner's capabilities ----------------------------------------------------------------


@capability(
    name="packageCodemodList",
    domain="packages",
    title="Codemods and your codemod runs",
    description=(
        "The codemods there are (id, description) and your latest runs with item counts; with "
        "runId, that run's per-package items (status, commits, changed paths, diff or checks)."
    ),
    input_schema={
        "type": "object",
        "properties": {"runId": ID},
        "additionalProperties": False,
    },
)
def package_codemod_list(ctx: Context, runId: str | None = None) -> dict[str, Any]:  # noqa: N803
    if runId:
        run = _owned_run(ctx, runId)
        return {"run": runs.summary(run), "items": _items(run, ctx.user_id)}
    mine = PackageCodemodRun.objects.filter(
        scope_user_id=ctx.user_id, initiated_by_user_id=ctx.user_id
    ).order_by("-created_at")[:50]
    return {"codemods": registry.listing(), "runs": [runs.summary(r) for r in mine]}


def _start_own(
    ctx: Context, codemod_id: str, mode: str, package_ids: list[str] | None
) -> PackageCodemodRun:
    """A run the caller starts over their own packages."""
    return runs.start(
        codemod_id,
        mode,
        initiated_by=ctx.user_id,
        scope_user_id=ctx.user_id,
        package_ids=package_ids,
    )


@capability(
    name="packageCodemodScan",
    domain="packages",
    mutates=True,
    title="Which of your packages a codemod applies to",
    description="Check your packages (or packageIds) against a codemod; nothing changes.",
    input_schema=_start_props(admin=False),
)
def package_codemod_scan(
    ctx: Context,
    codemodId: str,  # noqa: N803
    packageIds: list[str] | None = None,  # noqa: N803
) -> dict[str, Any]:
    run = _start_own(ctx, codemodId, CodemodMode.SCAN, packageIds)
    return _inline(run, ctx.user_id)


@capability(
    name="packageCodemodDryRun",
    domain="packages",
    mutates=True,
    title="Preview a codemod on your packages",
    description="The diff a codemod would make to each of your packages; nothing changes.",
    input_schema=_start_props(admin=False),
)
def package_codemod_dry_run(
    ctx: Context,
    codemodId: str,  # noqa: N803
    packageIds: list[str] | None = None,  # noqa: N803
) -> dict[str, Any]:
    run = _start_own(ctx, codemodId, CodemodMode.DRY_RUN, packageIds)
    return _inline(run, ctx.user_id)


@capability(
    name="packageCodemodApply",
    domain="packages",
    mutates=True,
    title="Apply a codemod to your packages",
    description=(
        "Rewrite each of your packages the codemod applies to and publish it (same checks as "
        "a save; a package that fails them is recorded failed and left as it was). Runs in "
        "the background: follow it with packageCodemodList and runId."
    ),
    input_schema=_start_props(admin=False),
)
def package_codemod_apply(
    ctx: Context,
    codemodId: str,  # noqa: N803
    packageIds: list[str] | None = None,  # noqa: N803
) -> dict[str, Any]:
    run = _start_own(ctx, codemodId, CodemodMode.APPLY, packageIds)
    _enqueue(run)
    return {"run": runs.summary(run)}


@capability(
    name="packageCodemodRevert",
    domain="packages",
    mutates=True,
    title="Revert one of your codemod runs",
    description=(
        "Publish each package the apply run changed back to its prior content, as a new "
        "commit; a package changed since is skipped."
    ),
    input_schema={
        "type": "object",
        "properties": {"runId": ID},
        "required": ["runId"],
        "additionalProperties": False,
    },
)
def package_codemod_revert(ctx: Context, runId: str) -> dict[str, Any]:  # noqa: N803
    revert = runs.start_revert(_owned_run(ctx, runId), initiated_by=ctx.user_id)
    _enqueue(revert)
    return {"run": runs.summary(revert)}


# The operator's capabilities -------------------------------------------------------------


def _admin_start(
    ctx: Context, mode: str, codemodId: str, userId: str | None, packageIds: Any, limit: int
) -> PackageCodemodRun:
    return runs.start(
        codemodId,
        mode,
        initiated_by=ctx.user_id,
        scope_user_id=_scope(ctx, userId),
        package_ids=packageIds,
        limit=limit,
    )


@capability(
    name="adminPackageCodemodScan",
    domain="admin",
    role="admin",
    mutates=True,
    title="Scan packages with a codemod (operator)",
    description=(
        "Which packages (one account's with userId, else every account's) a codemod applies "
        "to; nothing changes."
    ),
    input_schema=_start_props(admin=True),
)
def admin_package_codemod_scan(
    ctx: Context,
    codemodId: str,  # noqa: N803
    userId: str | None = None,  # noqa: N803
    packageIds: list[str] | None = None,  # noqa: N803
    limit: int = runs.MAX_PACKAGES,
) -> dict[str, Any]:
    # Audit-first like every operator write: the run's rows are a write, whatever they show.
    audit.record_intent(ctx, "adminPackageCodemodScan", f"codemod={codemodId}")
    run = _admin_start(ctx, CodemodMode.SCAN, codemodId, userId, packageIds, limit)
    return _inline(run, None)


@capability(
    name="adminPackageCodemodDryRun",
    domain="admin",
    role="admin",
    mutates=True,
    title="Preview a codemod (operator)",
    description="The diff a codemod would make to each package in scope; nothing changes.",
    input_schema=_start_props(admin=True),
)
def admin_package_codemod_dry_run(
    ctx: Context,
    codemodId: str,  # noqa: N803
    userId: str | None = None,  # noqa: N803
    packageIds: list[str] | None = None,  # noqa: N803
    limit: int = runs.MAX_PACKAGES,
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPackageCodemodDryRun", f"codemod={codemodId}")
    run = _admin_start(ctx, CodemodMode.DRY_RUN, codemodId, userId, packageIds, limit)
    return _inline(run, None)


@capability(
    name="adminPackageCodemodApply",
    domain="admin",
    role="admin",
    mutates=True,
    title="Apply a codemod (operator)",
    description=(
        "Rewrite and publish every package in scope the codemod applies to, in the "
        "background, one per-package result each. With runId instead, resume that stopped "
        "apply run where it stopped."
    ),
    input_schema={
        **_start_props(admin=True),
        "properties": {**_start_props(admin=True)["properties"], "runId": ID},
        "required": [],
        "oneOf": [{"required": ["codemodId"]}, {"required": ["runId"]}],
    },
)
def admin_package_codemod_apply(
    ctx: Context,
    codemodId: str | None = None,  # noqa: N803
    userId: str | None = None,  # noqa: N803
    packageIds: list[str] | None = None,  # noqa: N803
    limit: int = runs.MAX_PACKAGES,
    runId: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    if runId:
        audit.record_intent(ctx, "adminPackageCodemodApply", f"resume={runId}")
        found = PackageCodemodRun.objects.filter(id=runId, mode=CodemodMode.APPLY).first()
        if found is None:
            raise runs.RunNotFound(details={"runId": runId})
        run = runs.resume(found)
    else:
        assert codemodId is not None
        audit.record_intent(ctx, "adminPackageCodemodApply", f"codemod={codemodId}")
        run = _admin_start(ctx, CodemodMode.APPLY, codemodId, userId, packageIds, limit)
    _enqueue(run)
    return {"run": runs.summary(run)}


@capability(
    name="adminPackageCodemodRevert",
    domain="admin",
    role="admin",
    mutates=True,
    title="Revert a codemod run (operator)",
    description=(
        "Publish each package an apply run changed back to its prior content, as a new "
        "commit; a package changed since the apply is skipped."
    ),
    input_schema={
        "type": "object",
        "properties": {"runId": ID},
        "required": ["runId"],
        "additionalProperties": False,
    },
)
def admin_package_codemod_revert(ctx: Context, runId: str) -> dict[str, Any]:  # noqa: N803
    audit.record_intent(ctx, "adminPackageCodemodRevert", f"run={runId}")
    found = PackageCodemodRun.objects.filter(id=runId).first()
    if found is None:
        raise runs.RunNotFound(details={"runId": runId})
    revert = runs.start_revert(found, initiated_by=ctx.user_id)
    _enqueue(revert)
    return {"run": runs.summary(revert)}
