"""Package jobs: ``package.json#kody.jobs`` declared by a package, synced when it publishes.

Each entry, ``{"<jobName>": {"export": "default", "schedule": {...}, "timezone"?, "args"?}}``,
becomes the job ``package-job:{packageId}:{jobName}`` (storage
``job:package-job:{packageId}:{jobName}``) whose target is that export of the package. A
publish creates new entries, updates changed ones (their next run follows the new schedule)
and deletes the package jobs the manifest no longer declares. They run as the owner: there is
no token behind a publish, so the owner's standing alone decides (``grants``).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from apps.jobs.actor import JobManager
from apps.jobs.models import Job
from apps.jobs.schedules import normalize
from kody.errors import KodyError

NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
MAX_JOBS = 20


def job_id(package_id: str, name: str) -> str:
    return f"package-job:{package_id}:{name}"


def problems(declared: dict[str, Any], exports: dict[str, str]) -> list[str]:
    """What is wrong with the manifest's jobs (checked before a publish changes anything)."""
    found: list[str] = []
    if len(declared) > MAX_JOBS:
        found.append(f"A package declares at most {MAX_JOBS} jobs.")
    now = timezone.now()
    for name, spec in declared.items():
        if not name or len(name) > 100 or not set(name) <= NAME_OK:
            found.append(f"Job name {name!r} must be letters, digits, '_', '-' or '.'.")
            continue
        if not isinstance(spec, dict):
            found.append(f"Job {name!r} must be an object.")
            continue
        export = spec.get("export", "default")
        key = "." if export in ("default", ".") else f"./{export}"
        if key not in exports:
            found.append(f"Job {name!r} runs export {export!r}, which the package lacks.")
        if not isinstance(spec.get("args", {}), dict):
            found.append(f"Job {name!r}: args must be an object.")
        try:
            normalize(spec.get("schedule"), str(spec.get("timezone", "UTC")), now)
        except KodyError as exc:
            found.append(f"Job {name!r}: {exc.message}")
    return found


def sync(
    user_id: str, package_id: str, kody_id: str, commit: str, declared: dict[str, Any]
) -> None:
    now = timezone.now()
    existing = set(
        Job.objects.filter(
            user_id=user_id, id__startswith=f"package-job:{package_id}:"
        ).values_list("id", flat=True)
    )
    wanted: set[str] = set()
    for name, spec in declared.items():
        jid = job_id(package_id, name)
        wanted.add(jid)
        tz = str(spec.get("timezone", "UTC"))
        stored, first = normalize(spec.get("schedule"), tz, now)
        target = {
            "package": kody_id,
            "export": str(spec.get("export", "default")),
            "args": dict(spec.get("args", {})),
        }
        fields = {
            "name": name,
            "published_commit": commit,
            "params_json": {"target": target},
            "schedule_json": stored,
            "timezone": tz,
            "next_run_at": first.isoformat(),
        }
        if jid in existing:
            JobManager.call(user_id, "update", jid, fields)
            continue
        JobManager.call(
            user_id,
            "create",
            job={
                **fields,
                "id": jid,
                "source_id": "",
                "storage_id": f"job:{jid}",
                "caller_context_json": {
                    "userId": user_id,
                    "surface": "job",
                    "scopes": ["*"],
                    "principal": f"job:{user_id}",
                },
            },
        )
    for jid in existing - wanted:
        JobManager.call(user_id, "delete", jid)
