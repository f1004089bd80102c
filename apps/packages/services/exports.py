"""Running a package export: the published bundle artifact, never a live checkout.

An export's module is bundled at publish (``deno bundle``), with every static
``kody:@scope/name/export`` import resolved in the publisher's scope and inlined — that is the
pin: a later publish of the dependency changes nothing here until this package publishes
again. The module's default export is the handler, called with the arguments. The code runs as
the caller with storage ``package:{packageId}`` and the package's secrets; every run is
charged to ``execute_calls_per_day`` and recorded in the RunLog.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from apps.entitlements import services as entitlements
from apps.packages.models import PublishedBundleArtifact, SavedPackage
from apps.packages.services import run_history
from apps.packages.services.execute import run_code
from kody.capabilities import Context
from kody.errors import KodyError, NotFound
from kody.kv import store as kv


class ExportNotFound(NotFound):
    code = "export_not_found"
    message = "That package has no published export of that name."


def export_key(name: str) -> str:
    """The manifest key of an export name: ``default`` is ``"."``, ``x`` is ``"./x"``."""
    return "." if name in ("default", ".") else f"./{name.removeprefix('./')}"


def bundle_for(package: SavedPackage, export_name: str) -> tuple[str, str]:
    """The export's bundled module and the commit it was published from."""
    row = (
        PublishedBundleArtifact.objects.filter(
            user_id=package.user_id,
            source_id=package.source_id,
            artifact_kind="export",
            artifact_name=export_key(export_name),
        ).first()
        if package.source_id
        else None
    )
    data = kv.get(row.kv_key) if row is not None else None
    if row is None or data is None:
        raise ExportNotFound(details={"packageId": package.id, "export": export_name})
    return data.decode("utf-8"), row.published_commit


def run_export(
    ctx: Context,
    package: SavedPackage,
    export_name: str,
    args: Any,
    *,
    surface: str = "export",
    metadata: dict[str, Any] | None = None,
    record: bool = True,
) -> dict[str, Any]:
    """Run the export as ``ctx``; ``record=False`` when the caller records the run itself
    (a job's runner writes its own run record)."""
    code, commit = bundle_for(package, export_name)
    run_id = str(uuid.uuid4())
    entitlements.consume(ctx.user_id, "execute_calls_per_day", key=f"export:{run_id}")
    started = timezone.now()
    run = {
        "id": run_id,
        "surface": surface,
        "name": f"{package.kody_id or package.name}#{export_name}",
        "package_id": package.id,
        "package_kody_id": package.kody_id,
        "source_id": package.source_id,
        "published_commit": commit,
        "storage_id": f"package:{package.id}",
        "started_at": started,
        "metadata_json": metadata or {},
    }
    try:
        outcome = run_code(
            ctx,
            code,
            args,
            run_id=run_id,
            storage_id=f"package:{package.id}",
            package_id=package.id,
            module=True,
        )
    except KodyError as exc:
        if record:
            _record(ctx.user_id, run, "error", error=exc)
        raise
    if record:
        _record(ctx.user_id, run, "success", lines=outcome.logs)
    return {"result": outcome.result, "logs": outcome.logs, "durationMs": outcome.duration_ms}


def _record(
    user_id: str,
    run: dict[str, Any],
    status: str,
    *,
    error: KodyError | None = None,
    lines: list[dict[str, str]] | None = None,
) -> None:
    finished = timezone.now()
    run = {
        **run,
        "status": status,
        "finished_at": finished,
        "duration_ms": int((finished - run["started_at"]).total_seconds() * 1000),
    }
    if error is not None:
        run["error_name"] = error.code
        run["error_message"] = error.message[:1000]
    run_history.runs().record(
        user_id,
        run,
        [{"level": line["level"], "message": line["message"]} for line in (lines or [])],
    )
