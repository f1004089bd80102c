"""Restore an ``export_account`` directory into this instance (beyond the original: it could not).

All public rows go in one transaction, so a failed import leaves nothing behind; blobs are
uploaded after the rows commit (and removed again if the upload fails part way). Integer ids
are remapped: every table's auto-increment key gets a new value here, and every reference to
``users.id`` points at the new account. The stable user id is kept so blob keys and vector
namespaces stay valid — unless this instance already has it, then the import refuses.

Actor state goes in last, through each actor's ``import_page`` hook (the mailbox's threads and
messages, StorageRunner buckets); an actor without one is reported with its ``import_note``.

Not imported, by design, and reported: credential tables (their secrets are never exported),
secret values, another party's ids shown as ``[redacted]``, roles and permissions of the old
instance. Vectors are rebuilt by ``manage.py reindex --user EMAIL`` afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.hashers import make_password
from django.core.files import File
from django.db import models, transaction

from apps.accounts.export.service import (
    REDACTED,
    SCHEMA_VERSION,
    actor_sections,
    exported_tables,
)
from apps.accounts.models import User
from apps.accounts.ownership import model_for_table
from apps.accounts.surfaces import TableTarget
from kody import blobs
from kody.actors.base import actor_named
from kody.errors import KodyError

# Roles and permissions belong to the old instance; claims are re-made for the imported address.
NOT_PORTABLE = {"users_groups", "users_user_permissions", "user_email_claims"}


class ImportRefused(KodyError):
    code = "import_refused"
    status = 400


class ImportIncomplete(KodyError):
    code = "import_incomplete"
    status = 503


@dataclass
class ImportReport:
    user: User | None = None
    rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    blobs: int = 0
    warnings: list[str] = field(default_factory=list)


def verify(directory: Path) -> dict[str, Any]:
    """Check the schema version and every checksum; the manifest if all is well."""
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise ImportRefused(f"{directory} has no manifest.json")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("schemaVersion") != SCHEMA_VERSION:
        raise ImportRefused(
            f"export schema version {manifest.get('schemaVersion')!r} is not {SCHEMA_VERSION}"
        )
    sums = directory / "SHA256SUMS"
    if not sums.is_file():
        raise ImportRefused("the export has no SHA256SUMS")
    for line in sums.read_text().splitlines():
        digest, name = line.split("  ", 1)
        path = directory / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise ImportRefused(f"checksum mismatch for {name}")
    return manifest


def import_account(directory: Path, *, email: str | None = None) -> ImportReport:
    manifest = verify(directory)
    report = ImportReport()
    stable_id = manifest["userId"]
    if User.objects.filter(stable_user_id=stable_id).exists():
        raise ImportRefused("an account with this stable user id already exists here")
    with transaction.atomic():
        user = _import_user(directory, stable_id, email, report)
        id_maps: dict[str, dict[Any, Any]] = {"users": {_old_user_pk(directory): user.pk}}
        for target in reversed(exported_tables()):
            if target.table == "users":
                continue
            _import_table(directory, target, user, id_maps, report)
        from apps.accounts.services.identity import _claim

        _claim(user, user.email)
    report.user = user
    uploaded: list[tuple[str, str]] = []
    try:
        for bucket, key, path in _blob_files(directory):
            storage = blobs.bucket(bucket)
            with open(path, "rb") as handle:
                saved = storage.save(key, File(handle))
            uploaded.append((bucket, saved))
            if saved != key:
                raise ImportRefused(f"{bucket}/{key} already exists here")
    except Exception:
        for bucket, key in uploaded:
            blobs.bucket(bucket).delete(key)
        raise
    report.blobs = len(uploaded)
    report.skipped["secret values"] = "never exported; set them again"
    try:
        import_actor_state(directory, manifest, report)
    except Exception as exc:
        raise ImportIncomplete(
            f"the account and its blobs are in, but actor state stopped at {exc!r:.200}; "
            "run import_account again with --resume",
            details={"userId": stable_id},
        ) from exc
    return report


def resume(directory: Path) -> ImportReport:
    """Run the actor-state part again for an account an earlier import created."""
    manifest = verify(directory)
    user = User.objects.filter(stable_user_id=manifest["userId"]).first()
    if user is None:
        raise ImportRefused("no account here has this export's stable user id; import it first")
    report = ImportReport(user=user)
    import_actor_state(directory, manifest, report)
    return report


def import_actor_state(directory: Path, manifest: dict[str, Any], report: ImportReport) -> None:
    """Each exported actor section through its ``import_page`` hook, page by page, in the
    user's own actors (so the kernel's owner checks and schema rules apply). The hooks are
    idempotent: after a failure here the account exists, and ``import_account DIR --resume``
    runs this part again."""
    sections = actor_sections()
    user_id = manifest["userId"]
    for entry in manifest["sections"]:
        name = entry["section"]
        if name in ("d1_table", "r2_object"):
            continue
        if name == "artifact_repos":
            _import_repos(directory, report)
            continue
        surface = sections.get(name)
        if surface is None or surface.import_page is None:
            why = surface.import_note if surface is not None else "unknown to this instance"
            report.skipped[f"actor:{name}"] = why
            continue
        path = directory / "sections" / f"{name}.jsonl"
        if not path.is_file():
            continue
        actor = actor_named(surface.actor)
        with open(path) as handle:
            for line in handle:
                page = json.loads(line) if line.strip() else {}
                if not page:
                    continue  # the actor never ran for the old account: nothing to create
                answer = actor.call(user_id, surface.import_page, page=page)
                for table, count in answer.get("imported", {}).items():
                    key = f"{name}.{table}"
                    report.rows[key] = report.rows.get(key, 0) + int(count)


def _import_repos(directory: Path, report: ImportReport) -> None:
    """Each repo's git bundle into its (kept) repo id; a repo that already has refs was
    restored by an earlier run (``--resume``) and is left as it is."""
    from apps.packages.services.git import read_refs
    from apps.packages.services.git.bundles import import_bundle

    path = directory / "sections" / "artifact_repos.jsonl"
    if not path.is_file():
        return
    with open(path) as handle:
        for line in handle:
            row = json.loads(line) if line.strip() else None
            if not row or not row.get("bundle") or read_refs(row["repoId"]):
                continue
            import_bundle(row["repoId"], directory / row["bundle"])
            report.rows["artifact_repos"] = report.rows.get("artifact_repos", 0) + 1


def _rows(directory: Path, table: str) -> list[dict[str, Any]]:
    path = directory / "sections" / f"d1_table.{table}.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _old_user_pk(directory: Path) -> Any:
    return _rows(directory, "users")[0]["id"]


def _import_user(directory: Path, stable_id: str, email: str | None, report: ImportReport) -> User:
    rows = _rows(directory, "users")
    if len(rows) != 1:
        raise ImportRefused("the export does not hold exactly one account row")
    row = dict(rows[0])
    row.pop("id", None)
    for column in ("is_superuser", "is_staff"):
        row[column] = False  # privileges of another instance are not imported
    if email:
        row["email"] = email
    if User.objects.filter(email__iexact=row["email"]).exists():
        raise ImportRefused(f"{row['email']} already has an account here; pass --email")
    if User.objects.filter(username__iexact=row["username"]).exists():
        raise ImportRefused(f"the username {row['username']!r} is taken here")
    user = User(**_field_values(User, row))
    user.stable_user_id = stable_id
    user.password = make_password(None)  # the hash is never exported: reset to sign in
    user.deleting_at = None
    user.save()
    _keep_timestamps(User, user, _field_values(User, row))
    report.rows["users"] = 1
    report.skipped["users.password_hash"] = "never exported; the account signs in after a reset"
    return user


def _import_table(
    directory: Path,
    target: TableTarget,
    user: User,
    id_maps: dict[str, dict[Any, Any]],
    report: ImportReport,
) -> None:
    rows = _rows(directory, target.table)
    if not rows:
        return
    if target.table in NOT_PORTABLE:
        report.skipped[target.table] = "belongs to the old instance"
        return
    model = model_for_table(target.table)
    missing = _required_redacted(model, target)
    if missing:
        report.skipped[target.table] = (
            f"credentials ({', '.join(missing)}) are never exported; create them again"
        )
        return
    pk = model._meta.pk
    renumber = isinstance(pk, models.AutoField | models.BigAutoField)
    made = 0
    masked = 0
    for row in rows:
        if any(row.get(column) == REDACTED for column in target.columns):
            masked += 1  # another person's id was hidden: the row cannot be rebuilt
            continue
        values = _field_values(model, row)
        for f in model._meta.concrete_fields:
            if isinstance(f, models.ForeignKey) and f.related_model is User:
                old = row.get(f.column)
                values[f.attname] = id_maps["users"].get(old) if old is not None else None
        old_pk = row.get(pk.column)
        if renumber:
            values.pop(pk.attname, None)
        obj = model(**values)
        obj.save(force_insert=True)
        _keep_timestamps(model, obj, values)
        if renumber:
            id_maps.setdefault(target.table, {})[old_pk] = obj.pk
        made += 1
    report.rows[target.table] = made
    if masked:
        report.warnings.append(f"{target.table}: {masked} shared row(s) skipped (other party)")


def _keep_timestamps(model: type[models.Model], obj: models.Model, values: dict) -> None:
    """``auto_now`` fields were stamped by ``save``; put the exported times back."""
    stamped = {
        f.attname: values[f.attname]
        for f in model._meta.concrete_fields
        if getattr(f, "auto_now", False) and f.attname in values
    }
    if stamped:
        model._default_manager.filter(pk=obj.pk).update(**stamped)


def _field_values(model: type[models.Model], row: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for f in model._meta.concrete_fields:
        if f.column in row:
            value = row[f.column]
            if isinstance(value, dict) and set(value) == {"base64"}:
                value = base64.b64decode(value["base64"])
            values[f.attname] = f.to_python(value) if not isinstance(f, models.JSONField) else value
    return values


def _required_redacted(model: type[models.Model], target: TableTarget) -> list[str]:
    required = []
    for column in target.redact:
        for f in model._meta.concrete_fields:
            if f.column == column and not f.null and not f.has_default():
                required.append(column)
    return required


def _blob_files(directory: Path):  # type: ignore[no-untyped-def]
    root = directory / "blobs"
    if not root.is_dir():
        return
    for bucket_dir in sorted(root.iterdir()):
        for path in sorted(bucket_dir.rglob("*")):
            if path.is_file():
                yield bucket_dir.name, path.relative_to(bucket_dir).as_posix(), path
