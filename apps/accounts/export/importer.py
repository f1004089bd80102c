"""Restore an ``export_account`` directory into this instance, treating it as hostile input.

An archive can come from anyone moving between instances, so nothing in it is believed:

1. ``archive.open_archive`` checks the tree (regular files only, every one listed in and
   matching ``SHA256SUMS``, no path leaving the directory) and the manifest (its ``userId``
   has the stable-id shape).
2. Everything is planned before anything is written: the account row through an allow-list,
   every table through ``trust.plan_table`` (owner columns rewritten or the import refused,
   rows naming other accounts left out, the table's own rule for what grants power), every
   blob key rebuilt by its builder under the imported account's prefixes and checked absent.
3. One transaction writes the rows; the blobs are created inside it with a create-only write
   (``kody.blobs.create_new``), and if anything fails the transaction rolls back and only the
   objects this import created are deleted.

The imported account's stable id is minted here as a signup's is (from its email), never
read from the archive: the archive cannot choose which id, schema or key prefix it lands in.
Rows and blob keys naming the archive's id are rewritten to the new one.

Actor state goes in last, through each actor's ``import_page`` hook (idempotent, so
``--resume`` can finish it); an actor without one is reported with its ``import_note``.
Vectors are rebuilt by ``manage.py reindex --user EMAIL`` afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import DataError, IntegrityError, models, transaction
from django.utils import timezone

from apps.accounts.export import blobplan
from apps.accounts.export.archive import Archive, ImportRefused, open_archive
from apps.accounts.export.service import actor_sections, exported_tables
from apps.accounts.export.trust import (
    NOT_IMPORTED,
    USER_PK,
    Ref,
    TablePlan,
    names_existing_accounts,
    plan_table,
)
from apps.accounts.importing import ImportContext
from apps.accounts.models import User
from apps.accounts.ownership import model_for_table
from apps.accounts.surface_kinds import TableTarget
from kody import blobs
from kody.actors.base import actor_named
from kody.errors import KodyError

__all__ = ["ImportIncomplete", "ImportRefused", "ImportReport", "import_account", "resume"]

# The only account columns an archive may set; plan, Stripe ids, account type, verification
# and moderation stamps, privileges and metrics belong to the instance that set them.
USER_COLUMNS_IMPORTED = (
    "display_name",
    "bio",
    "profile_visibility",
    "created_at",
    "job_retention_success_once_days",
    "job_retention_failed_once_days",
    "job_retention_disabled_recurring_days",
    "experiments_opt_in",
    "time_zone",
)


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


@dataclass
class Plan:
    ctx: ImportContext
    user: User  # unsaved
    tables: list[TablePlan]
    blobs: list[blobplan.PlannedBlob]


def import_account(directory: Path, *, email: str | None = None) -> ImportReport:
    archive = open_archive(directory)
    report = ImportReport()
    plan = _plan(archive, email, report)
    user = _write(plan, report)
    report.user = user
    report.warnings.extend(plan.ctx.warnings)
    report.skipped["secret values"] = "never exported; set them again"
    try:
        import_actor_state(archive, user, report)
    except Exception as exc:
        raise ImportIncomplete(
            f"the account and its blobs are in, but actor state stopped at {exc!r:.200}; "
            "run import_account again with --resume",
            details={"userId": user.stable_user_id},
        ) from exc
    return report


def resume(directory: Path, *, email: str | None = None) -> ImportReport:
    """Run the actor-state part again for the account an earlier import of this archive made:
    the same address, username and creation time (to the microsecond), and still no password
    (imported accounts start without one), so ``--resume`` cannot pour an archive into an
    account that was not imported from it."""
    archive = open_archive(directory)
    row = _account_row(archive)
    address = (email or str(row.get("email", ""))).strip().lower()
    user = User.objects.filter(email=address, username=str(row.get("username", ""))).first()
    created = User._meta.get_field("created_at").to_python(row.get("created_at"))
    if user is None or user.has_usable_password() or user.created_at != created:
        raise ImportRefused("no account here was imported from this export; import it first")
    report = ImportReport(user=user)
    import_actor_state(archive, user, report)
    return report


# --- planning: everything checked, nothing written -------------------------------------


def _plan(archive: Archive, email: str | None, report: ImportReport) -> Plan:
    row = _account_row(archive)
    user = _plan_user(row, email, report)
    ctx = ImportContext(
        archive=archive,
        old_id=archive.user_id,
        new_id=user.stable_user_id,
        username=user.username,
        old_username=str(row.get("username") or "").lower(),
        now=timezone.now(),
    )
    old_pk = row["id"]
    planned: dict[str, TablePlan] = {}
    for target in reversed(exported_tables()):
        if target.table == "users" or not archive.rows(target.table):
            continue
        if target.table in NOT_IMPORTED:
            report.skipped[target.table] = NOT_IMPORTED[target.table]
            continue
        missing = _required_redacted(target)
        if missing:
            report.skipped[target.table] = (
                f"credentials ({', '.join(missing)}) are never exported; create them again"
            )
            continue
        table_plan = plan_table(target, ctx, old_pk, planned)
        names_existing_accounts(table_plan, ctx)
        _refuse_taken_keys(table_plan)
        planned[target.table] = table_plan
        if table_plan.masked:
            ctx.warn(f"{target.table}: {table_plan.masked} shared row(s) skipped (other party)")
    user.avatar_key = blobplan.avatar_key(row.get("avatar_key"), ctx)
    planned_blobs = blobplan.plan_blobs(
        archive,
        ctx,
        listing_ids=_planned_values(planned, "community_listings", "id"),
        repo_ids=_planned_values(planned, "entity_sources", "repo_id"),
    )
    for name, surface in actor_sections().items():
        if surface.import_page is not None:
            archive.pages(name)  # parse every page now: a broken one refuses before any write
    return Plan(ctx, user, list(planned.values()), planned_blobs)


def _planned_values(planned: dict[str, TablePlan], table: str, attname: str) -> set[str]:
    plan = planned.get(table)
    return {str(v[attname]) for _old, v in plan.rows if v.get(attname)} if plan else set()


def _account_row(archive: Archive) -> dict[str, Any]:
    rows = archive.rows("users")
    if len(rows) != 1:
        raise ImportRefused("the export does not hold exactly one account row")
    row = rows[0]
    if row.get("stable_user_id") != archive.user_id or row.get("id") is None:
        raise ImportRefused("the account row is not the manifest's userId")
    return row


def _plan_user(row: dict[str, Any], email: str | None, report: ImportReport) -> User:
    from apps.accounts.services import identity

    try:
        address = identity.clean_email(email or str(row.get("email") or ""))
        username = identity.clean_username(str(row.get("username") or ""))
        identity._check_available(address, username)
    except KodyError as exc:
        raise ImportRefused(f"users: {exc.message}") from None
    user = User(email=address, username=username)
    for column in USER_COLUMNS_IMPORTED:
        if row.get(column) is not None:
            f = User._meta.get_field(column)
            try:
                value = f.to_python(row[column])
                f.run_validators(value)
                if f.choices and value not in {c[0] for c in f.choices}:
                    raise ValueError(value)
            except Exception as exc:  # noqa: BLE001 - any bad value refuses, with its column
                raise ImportRefused(f"users.{column} holds an invalid value") from exc
            setattr(user, column, value)
    user.stable_user_id = identity._mint_stable_user_id(address)
    user.set_unusable_password()  # the hash is never exported: reset to sign in
    left = sorted(
        c
        for c in row
        if c not in (*USER_COLUMNS_IMPORTED, "id", "email", "username", "stable_user_id")
        and row[c] not in (None, "", False, 0)
    )
    if left:
        report.skipped["users columns"] = (
            f"set by the old instance, not imported: {', '.join(left)[:300]}"
        )
    report.skipped["users.password_hash"] = "never exported; the account signs in after a reset"
    return user


def _required_redacted(target: TableTarget) -> list[str]:
    model = model_for_table(target.table)
    return [
        f.column
        for f in model._meta.concrete_fields
        if f.column in target.redact and not f.null and not f.has_default()
    ]


def _refuse_taken_keys(plan: TablePlan) -> None:
    """Kept primary keys and unique columns must be free here: an import never overwrites a
    row, joins one, or claims a name (a repo id, an address) someone here already holds."""
    for f in plan.model._meta.concrete_fields:
        if not f.unique or (f.primary_key and plan.renumbered):
            continue
        wanted = [values.get(f.attname) for _old, values in plan.rows]
        wanted = [value for value in wanted if value is not None]
        if len(set(wanted)) != len(wanted):
            raise ImportRefused(f"{plan.table}.{f.column} repeats a value")
        found = plan.model._default_manager.filter(**{f"{f.attname}__in": wanted})
        for value in found.values_list(f.attname, flat=True)[:1]:
            raise ImportRefused(f"{plan.table}.{f.column} {str(value)[:80]!r} already exists here")


# --- writing: one transaction, blobs created only where nothing was ------------------------


def _write(plan: Plan, report: ImportReport) -> User:
    created: list[tuple[str, str]] = []
    try:
        with transaction.atomic():
            user = plan.user
            user.save(force_insert=True)
            report.rows["users"] = 1
            id_maps: dict[str, dict[Any, Any]] = {}
            for table_plan in plan.tables:
                report.rows[table_plan.table] = _insert(table_plan, user, id_maps)
            from apps.accounts.services.identity import _claim

            _claim(user, user.email)
            for blob in plan.blobs:
                blobs.create_new(blob.bucket, blob.key, plan.ctx.archive.read(blob.source))
                created.append((blob.bucket, blob.key))
    except BaseException as exc:
        for bucket, key in created:
            blobs.bucket(bucket).delete(key)
        if isinstance(exc, blobs.BlobExists):
            raise ImportRefused(f"blob {exc} already exists here; nothing was imported") from None
        if isinstance(exc, IntegrityError | DataError):
            # A constraint or a value the database refuses (a check the plan did not foresee).
            raise ImportRefused(
                f"the database refused a row ({str(exc).splitlines()[0][:200]}); "
                "nothing was imported"
            ) from None
        raise
    report.blobs = len(created)
    return user


def _insert(plan: TablePlan, user: User, id_maps: dict[str, dict[Any, Any]]) -> int:
    pk = plan.model._meta.pk
    for old_pk, planned in plan.rows:
        values = {name: _resolve(value, user, id_maps) for name, value in planned.items()}
        if plan.renumbered:
            values.pop(pk.attname, None)
        obj = plan.model(**values)
        obj.save(force_insert=True)
        _keep_timestamps(plan.model, obj, values)
        if plan.renumbered:
            id_maps.setdefault(plan.table, {})[old_pk] = obj.pk
    return len(plan.rows)


def _resolve(value: Any, user: User, id_maps: dict[str, dict[Any, Any]]) -> Any:
    if value is USER_PK:
        return user.pk
    if isinstance(value, Ref):
        return id_maps[value.table][value.old]
    return value


def _keep_timestamps(model: type[models.Model], obj: models.Model, values: dict) -> None:
    """``auto_now`` fields were stamped by ``save``; put the exported times back."""
    stamped = {
        f.attname: values[f.attname]
        for f in model._meta.concrete_fields
        if getattr(f, "auto_now", False) and f.attname in values
    }
    if stamped:
        model._default_manager.filter(pk=obj.pk).update(**stamped)


# --- actor state ---------------------------------------------------------------------------


def import_actor_state(archive: Archive, user: User, report: ImportReport) -> None:
    """Each exported actor section through its ``import_page`` hook, page by page, in the
    imported account's own actors (so the kernel's owner checks and schema rules apply; the
    hooks rebuild any key from their own ids). The hooks are idempotent: after a failure here
    the account exists, and ``import_account DIR --resume`` runs this part again."""
    sections = actor_sections()
    for entry in archive.manifest["sections"]:
        name = entry.get("section") if isinstance(entry, dict) else None
        if name in (None, "d1_table", "r2_object", "durable_object_summaries"):
            continue
        if name == "artifact_repos":
            import_repos(archive, user, report)
            continue
        if name == "oauth_grants":
            report.skipped[name] = "an agent's grant is made again by connecting it here"
            continue
        surface = sections.get(name)
        if surface is None or surface.import_page is None:
            why = surface.import_note if surface is not None else "unknown to this instance"
            report.skipped[f"actor:{str(name)[:80]}"] = why
            continue
        actor = actor_named(surface.actor)
        for page in archive.pages(name):
            answer = actor.call(user.stable_user_id, surface.import_page, page=page)
            for table, count in answer.get("imported", {}).items():
                key = f"{name}.{table}"
                report.rows[key] = report.rows.get(key, 0) + int(count)


def import_repos(archive: Archive, user: User, report: ImportReport) -> None:
    """Each repo's git bundle into the imported account's repo of that id. A bundle for a
    repo the account's imported ``entity_sources`` do not name refuses the import (it could
    pour objects into someone else's repo); a repo that already has refs was restored by an
    earlier run (``--resume``) and is left as it is."""
    # The account lifecycle sits above packages; imported here, where repos are restored.
    from apps.packages.models import EntitySource
    from apps.packages.services.git import read_refs
    from apps.packages.services.git.bundles import import_bundle

    owned = set(
        EntitySource.objects.filter(user_id=user.stable_user_id).values_list("repo_id", flat=True)
    )
    for row in archive.pages("artifact_repos"):
        bundle, repo_id = row.get("bundle"), row.get("repoId")
        if not bundle:
            continue
        if repo_id not in owned:
            raise ImportRefused("an artifact_repos bundle names a repo that is not the account's")
        if bundle not in archive.files:
            raise ImportRefused(f"{str(bundle)[:200]} is not listed in the export")
        if read_refs(repo_id):
            continue
        import_bundle(repo_id, archive.root / bundle)
        report.rows["artifact_repos"] = report.rows.get("artifact_repos", 0) + 1
