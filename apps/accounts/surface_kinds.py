"""The kinds of user-owned storage surface that ``apps.accounts.surfaces`` declares.

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
    # JSON columns that may name the owner anywhere inside (REPLACE_USER_COLUMN targets): the
    # deletion rewrites the stable id in them too, as it does in ``columns``.
    json_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExcludedTable:
    table: str
    reason: str


@dataclass(frozen=True)
class OutOfBandSurface:
    """Actor schemas, blob prefixes, KV key schemes and vector namespaces."""

    kind: str  # actor | blob_prefix | kv_prefix | repo_kv_prefix | listing_kv_prefix | vectors
    name: str
    export: bool
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)
