"""Which rows of a declared table belong to a user: one SQL builder for export and deletion.

Every ``TableTarget`` in ``surfaces.py`` names a match kind; ``owned_rows`` turns it into a
``WHERE`` clause with parameters for one user, so export and deletion can never disagree
about what is someone's. Keys for paging come from the table's model (its primary key).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.apps import apps
from django.db import connection, models

from apps.accounts.surface_kinds import Match, TableTarget
from apps.accounts.surfaces import USER_TABLE_TARGETS


@dataclass(frozen=True)
class Owner:
    """The two ids rows refer to a user by: the stable id (text) and ``users.id``."""

    stable_id: str
    db_id: int


def quote(name: str) -> str:
    return connection.ops.quote_name(name)


def owned_rows(target: TableTarget, owner: Owner) -> tuple[str, list[Any]]:
    """``(where_sql, params)`` selecting ``owner``'s rows of ``target.table``."""
    columns = target.columns
    if target.match in (
        Match.USER_ID,
        Match.USER_COLUMNS,
        Match.REPLACE_USER_COLUMN,
        Match.NULL_USER_COLUMN,
    ):
        return _any_equal(columns, owner.stable_id)
    if target.match == Match.DB_USER_ID:
        return _any_equal(columns, owner.db_id)
    if target.match == Match.DB_USER_TARGET:
        return _any_equal(columns, str(owner.db_id))
    if target.match in (Match.BUCKET_PARENT, Match.LISTING_CHILD):
        parent = parent_target(target)
        parent_where, params = owned_rows(parent, owner)
        inner = f"SELECT {quote('id')} FROM {quote(parent.table)} WHERE {parent_where}"
        return f"{quote(columns[0])} IN ({inner})", params
    raise ValueError(f"unknown match kind {target.match!r} for {target.table}")


def parent_target(target: TableTarget) -> TableTarget:
    """The owning declaration of a child table's parent (the parent's own user match)."""
    for candidate in USER_TABLE_TARGETS:
        if candidate.table == target.parent and candidate.match in (
            Match.USER_ID,
            Match.USER_COLUMNS,
            Match.DB_USER_ID,
        ):
            return candidate
    raise LookupError(f"{target.table}: parent {target.parent!r} has no owning declaration")


def _any_equal(columns: tuple[str, ...], value: Any) -> tuple[str, list[Any]]:
    clause = " OR ".join(f"{quote(column)} = %s" for column in columns)
    return f"({clause})", [value] * len(columns)


@cache
def model_for_table(table: str) -> type[models.Model]:
    for model in apps.get_models(include_auto_created=True):
        if model._meta.db_table == table:
            return model
    raise LookupError(f"no model for table {table!r}")


def key_column(table: str) -> str:
    """The column pages are ordered by: the table's primary key."""
    return model_for_table(table)._meta.pk.column


def table_columns(table: str) -> list[str]:
    return [field.column for field in model_for_table(table)._meta.concrete_fields]


def json_column_names(table: str) -> list[str]:
    """Columns Django stores as jsonb (its psycopg loader hands them back as text)."""
    return [
        field.column
        for field in model_for_table(table)._meta.concrete_fields
        if isinstance(field, models.JSONField)
    ]
