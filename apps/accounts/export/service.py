"""Account export: a bounded manifest and one page of one section at a time.

Sections (the seed's names):

* ``d1_table`` + ``table`` — the user's rows of one declared public table, keyset-paged by
  the table's primary key with a SQL ``LIMIT``; credential columns are left out and listed.
* one section per exported actor (``ActorSurface.export_section``, e.g. ``user_meter``) — the
  actor's own ``export_pages`` hook, called through the actor layer.
* ``r2_object`` — the user's blobs under their owner prefixes (mail, avatars, and the icons of
  their own community listings and repos), one ≤ 256 KiB base64 chunk per page
  (``apps.accounts.export.blob_pages``); the cursor binds bucket, key, size and version, so an
  object that changed between pages is reported (``object_changed``) instead of mixing
  generations.
* ``durable_object_summaries`` — one page summarising every per-user actor (the original's
  Durable Objects): whether the user has state in it, and in which section it is exported or
  why it is not.

Every cursor is signed and bound to the user and the section (``cursors``): another user's
cursor, or one from another section, is refused with ``invalid_cursor``.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, time
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from apps.accounts.actor_surfaces import actor_surfaces
from apps.accounts.export.blob_pages import R2_CHUNK_BYTES, blob_page, blob_prefixes
from apps.accounts.export.cursors import seal, unseal
from apps.accounts.out_of_band_surfaces import OUT_OF_BAND_SURFACES
from apps.accounts.ownership import (
    Owner,
    json_column_names,
    key_column,
    owned_rows,
    quote,
    table_columns,
)
from apps.accounts.surface_kinds import Match, TableTarget
from apps.accounts.surfaces import OPERATOR_OWNED_TABLES, USER_TABLE_TARGETS
from kody.actors.base import actor_named
from kody.blobs import buckets
from kody.capabilities.secrecy import redacted_call
from kody.errors import BadRequest, NotFound
from kody.userschema.schemas import has_actor_state

SCHEMA_VERSION = 1
PAGE_MAX = 500
REDACTED = "[redacted]"
SUMMARIES = "durable_object_summaries"


def owner_of(user: Any) -> Owner:
    return Owner(stable_id=user.stable_user_id, db_id=user.pk)


# --- what is exported -------------------------------------------------------------------


def exported_tables() -> list[TableTarget]:
    """One declaration per exported table (a table may be declared twice for deletion)."""
    seen: dict[str, TableTarget] = {}
    for target in USER_TABLE_TARGETS:
        if target.export and target.table not in seen:
            seen[target.table] = target
    return list(seen.values())


def _table_target(table: str) -> TableTarget:
    for target in exported_tables():
        if target.table == table:
            return target
    raise NotFound(f"{table!r} is not an exported table", details={"table": table})


def actor_sections() -> dict[str, Any]:
    return {
        surface.export_section: surface
        for surface in actor_surfaces().values()
        if surface.export_section is not None
    }


# --- the manifest -----------------------------------------------------------------------


def manifest(user: Any) -> dict[str, Any]:
    owner = owner_of(user)
    sections: list[dict[str, Any]] = []
    redacted: dict[str, list[str]] = {}
    warnings: list[str] = []
    for target in exported_tables():
        where, params = owned_rows(target, owner)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {quote(target.table)} WHERE {where}", params)
            count = cursor.fetchone()[0]
        hidden = _redacted_columns(target)
        if hidden:
            redacted[target.table] = hidden
        sections.append(
            {"section": "d1_table", "table": target.table, "count": count, "redacted": hidden}
        )
    for name, surface in sorted(actor_sections().items()):
        sections.append({"section": name, "actor": surface.actor, "count": None})
    sections.append({"section": "oauth_grants", "count": oauth_grant_count(owner)})
    blobs = 0
    try:
        for prefix in blob_prefixes(owner):
            blobs += sum(1 for _ in buckets.list_prefix(prefix.bucket, prefix.prefix))
    except Exception as exc:  # noqa: BLE001 - the manifest reports, the section fails closed
        warnings.append(f"blob store unavailable: {type(exc).__name__}")
    sections.append({"section": "r2_object", "count": blobs, "chunkBytes": R2_CHUNK_BYTES})
    sections.append({"section": SUMMARIES, "count": len(actor_surfaces())})
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM entity_sources WHERE user_id = %s", [owner.stable_id])
        sections.append({"section": "artifact_repos", "count": cursor.fetchone()[0]})
    return {
        "schemaVersion": SCHEMA_VERSION,
        "generatedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "userId": owner.stable_id,
        "sections": sections,
        "warnings": warnings,
        "redactedColumns": redacted,
        "security": {"secretValuesExported": False},
        "excludedD1Surfaces": _excluded_tables(),
        "excludedSurfaces": [
            {"kind": s.kind, "name": s.name, "reason": s.note}
            for s in OUT_OF_BAND_SURFACES
            if not s.export
        ]
        + [
            {"kind": "actor", "name": s.actor, "reason": s.note}
            for s in actor_surfaces().values()
            if s.export_section is None
        ],
        "chunking": {
            "capability": "accountExportSection",
            "pageMax": PAGE_MAX,
            "r2ChunkBytes": R2_CHUNK_BYTES,
        },
    }


def _excluded_tables() -> list[dict[str, str]]:
    excluded = [{"table": t.table, "reason": t.reason} for t in OPERATOR_OWNED_TABLES]
    exported = {t.table for t in exported_tables()}
    for target in USER_TABLE_TARGETS:
        if not target.export and target.table not in exported:
            reason = target.note or f"{target.match.value}: not the user's own content"
            excluded.append({"table": target.table, "reason": reason})
    return excluded


def _redacted_columns(target: TableTarget) -> list[str]:
    return [column for column in target.redact if column in table_columns(target.table)]


# --- sections ---------------------------------------------------------------------------


def section(
    user: Any,
    name: str,
    *,
    table: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    owner = owner_of(user)
    limit = max(1, min(int(limit), PAGE_MAX))
    if name == "d1_table":
        if not table:
            raise BadRequest("section d1_table needs a table", details={"field": "table"})
        return _table_page(owner, _table_target(table), cursor, limit)
    if name == "r2_object":
        return blob_page(owner, cursor)
    if name == SUMMARIES:
        return durable_object_summaries(owner)
    if name == "artifact_repos":
        return _artifact_repos_page(owner, cursor, limit)
    if name == "oauth_grants":
        return _oauth_grants_page(owner, cursor, limit)
    surface = actor_sections().get(name)
    if surface is None:
        raise NotFound(f"no export section {name!r}", details={"section": name})
    return _actor_page(owner, name, surface, cursor, limit)


def _table_page(owner: Owner, target: TableTarget, cursor: str | None, limit: int) -> dict:
    section_name = f"d1_table:{target.table}"
    after = unseal(owner, section_name, cursor)
    key = key_column(target.table)
    hidden = set(_redacted_columns(target))
    columns = [c for c in table_columns(target.table) if c not in hidden]
    where, params = owned_rows(target, owner)
    if after is not None:
        where = f"({where}) AND {quote(key)} > %s"
        params = [*params, after]
    sql = (
        f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(target.table)}"
        f" WHERE {where} ORDER BY {quote(key)} LIMIT %s"
    )
    json_columns = set(json_column_names(target.table))
    with connection.cursor() as db:
        db.execute(sql, [*params, limit + 1])
        rows = [dict(zip(columns, row, strict=True)) for row in db.fetchall()]
    for row in rows:
        for column in json_columns & row.keys():
            # Django's psycopg loader hands jsonb back as text; export the JSON itself.
            if isinstance(row[column], str):
                row[column] = json.loads(row[column])
    more = len(rows) > limit
    rows = rows[:limit]
    for row in rows:
        _mask_other_parties(target, owner, row)
        for column in json_columns & row.keys():
            row[column] = _redacted_calls(row[column])
    next_cursor = seal(owner, section_name, _plain(rows[-1][key])) if more else None
    return {
        "section": "d1_table",
        "table": target.table,
        "rows": json.loads(json.dumps(rows, cls=ExportEncoder)),
        "redacted": sorted(hidden),
        "nextCursor": next_cursor,
    }


def _redacted_calls(value: Any) -> Any:
    """A stored capability call (a job's target, however nested) never exports a secret
    argument (``kody.capabilities.secrecy``), whatever an old row holds."""
    if isinstance(value, dict):
        if isinstance(value.get("capability"), str) and isinstance(value.get("args"), dict):
            value = redacted_call(value)
        return {key: _redacted_calls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted_calls(item) for item in value]
    return value


def oauth_grant_count(owner: Owner) -> int:
    from apps.accounts.models import OAuthGrant

    return OAuthGrant.objects.filter(user_id=owner.db_id).count()


def _oauth_grants_page(owner: Owner, cursor: str | None, limit: int) -> dict:
    """OAuth grant metadata only (seed: ``oauthGrants``): client, scopes, times, never a token."""
    from apps.accounts.oauth.grants import export_rows

    after = unseal(owner, "oauth_grants", cursor) or 0
    rows = export_rows(owner.db_id, after=int(after), limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1]["id"] if rows else None
    # Shaped like an actor page, so every consumer of sections reads it the same way; not
    # imported (a grant is re-made by connecting the agent again).
    return {
        "section": "oauth_grants",
        "page": {"grants": rows},
        "nextCursor": seal(owner, "oauth_grants", last) if more else None,
    }


def _mask_other_parties(target: TableTarget, owner: Owner, row: dict[str, Any]) -> None:
    """On a row two users share (referrals, follows, grants), hide the other party's id."""
    if target.match != Match.USER_COLUMNS or len(target.columns) < 2:
        return
    for column in target.columns:
        if row.get(column) not in (None, owner.stable_id):
            row[column] = REDACTED


def durable_object_summaries(owner: Owner) -> dict[str, Any]:
    """Every per-user actor, in one page: has the user state there, and where is it exported
    (or why not). Bounded by the number of registered actors; reads no actor table."""
    summaries = []
    for name, surface in sorted(actor_surfaces().items()):
        summaries.append(
            {
                "actor": name,
                "hasState": has_actor_state(owner.stable_id, surface.actor),
                "exportSection": surface.export_section,
                "imported": surface.import_page is not None,
                "note": surface.note if surface.export_section is None else surface.import_note,
            }
        )
    return {"section": SUMMARIES, "page": {"summaries": summaries}, "nextCursor": None}


def _actor_page(owner: Owner, name: str, surface: Any, cursor: str | None, limit: int) -> dict:
    inner = unseal(owner, name, cursor)
    if not has_actor_state(owner.stable_id, surface.actor):
        # The actor never ran for this user: its tables do not exist, and calling it would
        # create them only to read nothing (kody.userschema.tablesets).
        return {"section": name, "actor": surface.actor, "page": {}, "nextCursor": None}
    actor = actor_named(surface.actor)
    page = actor.call(owner.stable_id, surface.export_pages, cursor=inner, limit=limit)
    inner_next = page.pop("next_cursor", None)
    return {
        "section": name,
        "actor": surface.actor,
        "page": page,
        "nextCursor": seal(owner, name, inner_next) if inner_next else None,
    }


def _artifact_repos_page(owner: Owner, cursor: str | None, limit: int) -> dict:
    """The owner's repo pointers (``entity_sources``) with each repo's refs; ``export_account``
    writes the objects beside them as ``repos/<sourceId>.bundle``."""
    after = unseal(owner, "artifact_repos", cursor) or ""
    with connection.cursor() as db:
        db.execute(
            "SELECT id, entity_kind, entity_id, repo_id, published_commit, indexed_commit,"
            " manifest_path, source_root FROM entity_sources"
            " WHERE user_id = %s AND id > %s ORDER BY id LIMIT %s",
            [owner.stable_id, after, limit + 1],
        )
        found = db.fetchall()
        more, found = len(found) > limit, found[:limit]
        db.execute(
            "SELECT repo_id, name, target FROM source_repo_refs WHERE repo_id = ANY(%s)",
            [[row[3] for row in found]],
        )
        refs: dict[str, dict[str, str]] = {}
        for repo_id, name, target in db.fetchall():
            refs.setdefault(repo_id, {})[name] = target
    rows = [
        {
            "sourceId": r[0],
            "entityKind": r[1],
            "entityId": r[2],
            "repoId": r[3],
            "publishedCommit": r[4],
            "indexedCommit": r[5],
            "manifestPath": r[6],
            "sourceRoot": r[7],
            "defaultBranch": "main",
            "refs": refs.get(r[3], {}),
            "bundle": f"repos/{r[0]}.bundle" if refs.get(r[3]) else None,
        }
        for r in found
    ]
    return {
        "section": "artifact_repos",
        "rows": rows,
        "nextCursor": seal(owner, "artifact_repos", rows[-1]["sourceId"]) if more else None,
    }


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, cls=ExportEncoder))


class ExportEncoder(DjangoJSONEncoder):
    """Django's encoder, but lossless: times keep their microseconds (Django's cuts them to
    milliseconds, so an import would not restore what was exported), bytes go as base64."""

    def default(self, o: Any) -> Any:
        if isinstance(o, bytes | memoryview):
            return {"base64": base64.b64encode(bytes(o)).decode("ascii")}
        if isinstance(o, datetime | time):
            text = o.isoformat()
            return text[:-6] + "Z" if text.endswith("+00:00") else text
        return super().default(o)
