"""The one list of every user-owned storage surface.

Account deletion and export both read this module, and ``tests/accounts/test_surfaces_guardrail.py``
introspects the migrated database and fails when a table with a user-ownership column
(``user_id``, ``*_user_id``, ``owner_*``) is neither declared here nor named as operator-owned or
global with a reason. Adding a model therefore forces a decision about deletion and export.

Match kinds follow the original's data-targets list:

* ``user_id`` — the listed text columns hold the owner's stable user id.
* ``db_user_id`` — the listed integer column is a foreign key to ``users.id``.
* ``user_columns`` — any of the listed stable-id columns makes the row the user's (social rows).
* ``replace_user_column`` — the column names the user but the row is someone else's: on deletion
  it is rewritten to ``deleted-user``; never exported.
* ``null_user_column`` — as above, but cleared to NULL.
* ``bucket_parent`` — a child table owned through its parent bucket (``parent``).
* ``listing_child`` — rows hanging off the user's own community listings.
* ``db_user_target`` — a text column holding ``str(users.id)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Match(StrEnum):
    USER_ID = "user_id"
    DB_USER_ID = "db_user_id"
    USER_COLUMNS = "user_columns"
    REPLACE_USER_COLUMN = "replace_user_column"
    NULL_USER_COLUMN = "null_user_column"
    BUCKET_PARENT = "bucket_parent"
    LISTING_CHILD = "listing_child"
    DB_USER_TARGET = "db_user_target"


DELETED_USER = "deleted-user"


@dataclass(frozen=True)
class TableTarget:
    table: str
    match: Match
    columns: tuple[str, ...] = ("user_id",)
    export: bool = True
    # Credential-equivalent columns never leave the database in an export.
    redact: tuple[str, ...] = ()
    parent: str = ""
    note: str = ""


@dataclass(frozen=True)
class ExcludedTable:
    table: str
    reason: str


@dataclass(frozen=True)
class OutOfBandSurface:
    """Actor schemas, blob prefixes, KV key schemes and vector namespaces."""

    kind: str  # actor | blob_prefix | kv_prefix | vectors
    name: str
    export: bool
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)


# Deletion runs the D1-style targets in this order (children before parents); export reads the
# same list. Each app owns its own block; keep blocks in dependency order.
USER_TABLE_TARGETS: tuple[TableTarget, ...] = (
    # --- accounts -------------------------------------------------------------------------
    # --- entitlements ---------------------------------------------------------------------
    # --- packages -------------------------------------------------------------------------
    # --- community ------------------------------------------------------------------------
    # --- mailbox --------------------------------------------------------------------------
    # --- jobs -----------------------------------------------------------------------------
    # --- accounts (identity rows last: they hang off users.id) ----------------------------
)

# Tables that carry a user-looking column but are not user data, each with the reason.
OPERATOR_OWNED_TABLES: tuple[ExcludedTable, ...] = (
    # --- system_email ---------------------------------------------------------------------
)

# Tables with no owner at all (global config, ledgers, cursors). Listed so the guardrail can
# tell "forgotten" from "deliberately global".
GLOBAL_TABLES: tuple[ExcludedTable, ...] = ()

OUT_OF_BAND_SURFACES: tuple[OutOfBandSurface, ...] = ()


def target_tables() -> set[str]:
    return {target.table for target in USER_TABLE_TARGETS}


def declared_tables() -> set[str]:
    return target_tables() | {t.table for t in OPERATOR_OWNED_TABLES} | {
        t.table for t in GLOBAL_TABLES
    }
