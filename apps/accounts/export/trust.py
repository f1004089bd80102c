"""The importer's generic pass over one exported table: nothing in a row is taken on trust.

For every row, before anything is written:

* **Owner columns** (the declaration's columns in ``surfaces.py``: ``user_id``,
  ``owner_user_id``, ``actor_user_id``, a ``users.id`` foreign key, ...) must name the exported
  account; they are rewritten to the imported one. A row whose owner column names anyone else
  refuses the import. A shared row whose other party the export hid (``[redacted]``) is left
  out, as it cannot be rebuilt.
* **Other user columns** (``*_user_id``, ``owner_*``, a foreign key to ``users``): the
  exported account becomes the imported one; "who acted" columns that deletion rewrites or
  clears (a reviewer, a moderator) are cleared; a row that names another account through any
  other column is left out with a warning — it is never written.
* **JSON** is walked: the exported id becomes the imported one wherever it appears, and a
  ``userId``-like key naming anyone else refuses the import.
* **Foreign keys** to the account's own tables must point at rows of the archive. One to a
  global table is kept only when it names a row this instance has by a key that means the
  same everywhere (a banner's UUID, an app's slug); an instance-local number, or a row this
  instance does not have, leaves the row out with a warning.
* Every string that is the stable id of another account here refuses the import (checked in
  one query per table by ``names_existing_accounts``).

Then the table's own rule (``rules.py``) rebuilds or refuses what grants power.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from apps.accounts.export.archive import STABLE_ID, ImportRefused
from apps.accounts.export.service import REDACTED
from apps.accounts.importing import ImportContext, rule_for
from apps.accounts.models import User
from apps.accounts.ownership import model_for_table
from apps.accounts.surface_kinds import Match, TableTarget
from apps.accounts.surfaces import USER_TABLE_TARGETS

# Tables whose rows are never imported, with the reason the command prints.
NOT_IMPORTED = {
    "users_groups": "roles and permissions belong to the old instance",
    "users_user_permissions": "roles and permissions belong to the old instance",
    "user_email_claims": "claims are made again for the imported address",
    "oauth_connections": "sign-in links are credentials; connect the provider again",
    "feature_flag_user_overrides": "operator settings of the old instance",
    "compute_overage_invoices": "billing of the old instance",
    "community_bans": "moderation of the old instance",
    "referrals": "referral credit is granted by the instance where the referral happened",
    "username_redirects": "usernames of the old instance; they would claim names here",
}

USER_COLUMN = re.compile(r"^(user_id|stable_user_id|.+_user_id|owner_.+)$")
# JSON keys that name an account (userId, ownerUserId, user_id, owner_user_id, ...).
USER_KEY = re.compile(r"user_?id$", re.IGNORECASE)


class UserPk:
    """Stands for the imported ``users.id`` until the account row exists."""

    def __repr__(self) -> str:
        return "<imported users.id>"


USER_PK = UserPk()


@dataclass(frozen=True)
class Ref:
    """A foreign key into a renumbered table of the archive, resolved at write time."""

    table: str
    old: Any


@dataclass
class TablePlan:
    table: str
    model: type[models.Model]
    rows: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)  # (old pk, values)
    masked: int = 0
    left_out: int = 0

    @property
    def renumbered(self) -> bool:
        return isinstance(self.model._meta.pk, models.AutoField | models.BigAutoField)


def owner_columns(target: TableTarget) -> set[str]:
    if target.match in (Match.USER_ID, Match.USER_COLUMNS, Match.DB_USER_ID):
        return set(target.columns)
    return set()


def acted_by_columns(table: str) -> set[str]:
    """Columns deletion rewrites or clears: who acted on the row, not whose it is."""
    return {
        column
        for target in USER_TABLE_TARGETS
        if target.table == table
        and target.match in (Match.REPLACE_USER_COLUMN, Match.NULL_USER_COLUMN)
        for column in target.columns
    }


def plan_table(
    target: TableTarget,
    ctx: ImportContext,
    old_pk: Any,
    planned: dict[str, TablePlan],
) -> TablePlan:
    model = model_for_table(target.table)
    plan = TablePlan(target.table, model)
    owners = owner_columns(target)
    acted = acted_by_columns(target.table)
    rule = rule_for(target.table)
    for row in ctx.archive.rows(target.table):
        if any(row.get(column) == REDACTED for column in target.columns):
            plan.masked += 1  # another person's id was hidden: the row cannot be rebuilt
            continue
        values = field_values(model, row, target.table)
        if not _owned(target, owners, row, ctx):
            raise ImportRefused(
                f"a {target.table} row does not belong to the exported account "
                f"({', '.join(sorted(owners))} name someone else)"
            )
        why = _rewrite_people(model, target, owners, acted, values, ctx, old_pk)
        why = why or _rewrite_references(model, target.table, values, planned)
        if why:
            ctx.warn(f"{target.table}: a row left out ({why})")
            plan.left_out += 1
            continue
        for f in model._meta.concrete_fields:
            if isinstance(f, models.JSONField) and values.get(f.attname) is not None:
                where = f"{target.table}.{f.column}"
                values[f.attname] = rewrite_json(values[f.attname], ctx, where)
        if rule is not None:
            ruled = rule(values, ctx)
            if ruled is None:
                plan.left_out += 1
                continue
            values = ruled
        plan.rows.append((row.get(model._meta.pk.column), values))
    return plan


def _owned(target: TableTarget, owners: set[str], row: dict[str, Any], ctx: ImportContext) -> bool:
    """Every owner column names the exported account — or, on a shared row, one of them does
    and the others are hidden (handled by the caller) or empty."""
    if not owners or target.match == Match.DB_USER_ID:
        return True  # users.id foreign keys are checked with the other foreign keys
    named = [row.get(column) for column in owners]
    if target.match == Match.USER_COLUMNS:
        return ctx.old_id in named and all(v in (ctx.old_id, None) for v in named)
    return all(value == ctx.old_id for value in named)


def _rewrite_people(
    model: type[models.Model],
    target: TableTarget,
    owners: set[str],
    acted: set[str],
    values: dict[str, Any],
    ctx: ImportContext,
    old_pk: Any,
) -> str | None:
    """Point every user column at the imported account; a reason if the row must stay out."""
    for f in model._meta.concrete_fields:
        value = values.get(f.attname)
        if isinstance(f, models.ForeignKey) and f.related_model is User:
            if value == old_pk and value is not None:
                values[f.attname] = USER_PK
            elif f.column in owners:
                raise ImportRefused(
                    f"a {target.table} row's {f.column} is not the exported account's users.id"
                )
            elif value is not None:
                if not f.null:
                    return f"{f.column} names another account"
                values[f.attname] = None
            continue
        if isinstance(f, models.ForeignKey):
            continue
        if f.column not in owners and not USER_COLUMN.match(f.column):
            continue
        if value is None:
            continue
        if value == ctx.old_id:
            values[f.attname] = ctx.new_id
        elif f.column in acted and f.null:
            values[f.attname] = None  # a moderator or reviewer of the old instance
        else:
            return f"{f.column} names another account"
    return None


def _rewrite_references(
    model: type[models.Model], table: str, values: dict[str, Any], planned: dict[str, TablePlan]
) -> str | None:
    for f in model._meta.concrete_fields:
        if not isinstance(f, models.ForeignKey) or f.related_model is User:
            continue
        value = values.get(f.attname)
        if value is None:
            continue
        related = f.related_model._meta.db_table
        parent = planned.get(related)
        if parent is not None:
            if value not in {old for old, _ in parent.rows}:
                raise ImportRefused(
                    f"a {table} row's {f.column} points at a {related} row "
                    "that is not in the export"
                )
            if parent.renumbered:
                values[f.attname] = Ref(related, value)
            continue
        related_pk = f.related_model._meta.pk
        if f.target_field == related_pk and isinstance(
            related_pk, models.AutoField | models.BigAutoField
        ):
            return f"{f.column} names a {related} row of the old instance"
        if not f.related_model._default_manager.filter(**{f.target_field.attname: value}).exists():
            return f"{f.column} names a {related} row this instance does not have"
    return None


def rewrite_json(value: Any, ctx: ImportContext, where: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if (
                isinstance(key, str)
                and USER_KEY.search(key)
                and isinstance(item, str)
                and item not in (ctx.old_id, "")
            ):
                raise ImportRefused(f"{where} names another account ({key})")
            out[key] = rewrite_json(item, ctx, where)
        return out
    if isinstance(value, list):
        return [rewrite_json(item, ctx, where) for item in value]
    if value == ctx.old_id:
        return ctx.new_id
    return value


def stable_ids_in(value: Any) -> set[str]:
    """Every string shaped like a stable user id inside a value (JSON walked)."""
    if isinstance(value, str):
        return {value} if STABLE_ID.match(value) else set()
    if isinstance(value, dict):
        return set().union(*(stable_ids_in(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(stable_ids_in(v) for v in value)) if value else set()
    return set()


def names_existing_accounts(plan: TablePlan, ctx: ImportContext) -> None:
    """Refuse a table whose rows, anywhere, carry the stable id of another account here."""
    found: set[str] = set()
    for _old, values in plan.rows:
        for value in values.values():
            found |= stable_ids_in(value)
    found -= {ctx.new_id}
    if found and User.objects.filter(stable_user_id__in=found).exists():
        raise ImportRefused(f"a {plan.table} row names another account of this instance")


def field_values(model: type[models.Model], row: dict[str, Any], table: str) -> dict[str, Any]:
    """The row as model values, each through its field's own parser (bad types refuse)."""
    values = {}
    for f in model._meta.concrete_fields:
        if f.column not in row:
            continue
        value = row[f.column]
        try:
            if isinstance(value, dict) and set(value) == {"base64"}:
                value = base64.b64decode(value["base64"], validate=True)
            if not isinstance(f, models.JSONField):
                value = f.to_python(value)
        except (ValidationError, ValueError, TypeError) as exc:
            raise ImportRefused(f"{table}.{f.column} holds a value of the wrong type") from exc
        if _has_nul(value):
            # Postgres text and jsonb cannot hold NUL: refuse here rather than mid-write.
            raise ImportRefused(f"{table}.{f.column} holds a NUL character")
        values[f.attname] = value
    return values


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False
