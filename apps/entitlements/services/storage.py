"""Storage bytes: what a user's public rows weigh, and the bucket estimates beside it.

The authoritative counter lives in the UserMeter actor (``storage_bytes_state``); this module
computes the value the reconciliation lane sets there. Payload bytes are the uncompressed
text size of every row the user owns in the public schema (``octet_length(row::text)``; the
on-disk size would let compressible data slip under the cap), found through
``apps.accounts.surfaces`` so a new user-owned table is counted without an edit here.
Identity/auth rows and platform telemetry are not payload and are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from django.apps import apps as django_apps
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from apps.accounts import surfaces
from apps.accounts.surface_kinds import Match, TableTarget

# Platform-generated rows that describe the user rather than hold their data.
NOT_PAYLOAD = frozenset(
    {
        "users",
        "usage_events",
        "usage_rollups",
        "compute_overage_invoices",
        "feature_flag_exposure_rollups",
        "user_storage_buckets",
        "user_usage_campaigns",
        "user_usage_campaign_sends",
        "mcp_agent_sessions",
        "username_redirects",
        "package_kody_id_redirects",
        "saved_package_search_index_debt",
        "search_index_debt",
        "repo_session_due_owners",
        "email_inbound_due_owners",
        "email_outbound_provider_index",
        "email_outbound_provider_index_repair_owners",
        "package_service_states",
        # The vector upserts' skip cache: derived from rows already counted, kept by the
        # platform (a job or memory written once leaves one here that its owner never sees).
        "vector_embed_fingerprints",
    }
)
_IDENT_OK = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _ident(name: str) -> str:
    if not name or not set(name) <= _IDENT_OK:
        raise ValueError(f"unsafe SQL identifier {name!r}")
    return f'"{name}"'


@lru_cache(maxsize=1)
def _existing_tables() -> frozenset[str]:
    with connection.cursor() as cursor:
        return frozenset(connection.introspection.table_names(cursor))


def _parent_match(table: str) -> Match | None:
    return next((t.match for t in surfaces.USER_TABLE_TARGETS if t.table == table), None)


def _clause(target: TableTarget) -> str | None:
    rows = f"SELECT octet_length(t.*::text) AS b FROM {_ident(target.table)} t WHERE"
    if target.match == Match.USER_ID:
        return f"{rows} t.{_ident(target.columns[0])} = %(uid)s"
    if target.match == Match.USER_COLUMNS:
        return rows + " OR ".join(f" t.{_ident(c)} = %(uid)s" for c in target.columns)
    if target.match == Match.BUCKET_PARENT and target.parent:
        if _parent_match(target.parent) != Match.USER_ID:
            return None  # a parent owned by the database user id (two-factor devices): no payload
        owned = f"SELECT p.id FROM {_ident(target.parent)} p WHERE p.user_id = %(uid)s"
        return f"{rows} t.{_ident(target.columns[0])} IN ({owned})"
    return None


@lru_cache(maxsize=1)
def payload_sql() -> str:
    existing = _existing_tables()
    seen: set[tuple[str, str]] = set()
    parts: list[str] = []
    for target in surfaces.USER_TABLE_TARGETS:
        key = (target.table, target.match)
        if target.table in NOT_PAYLOAD or target.table not in existing or key in seen:
            continue
        if target.parent and target.parent not in existing:
            continue
        clause = _clause(target)
        if clause:
            seen.add(key)
            parts.append(clause)
    if not parts:
        return "SELECT 0"
    return "SELECT COALESCE(SUM(b), 0)::bigint FROM (" + " UNION ALL ".join(parts) + ") rows"


def payload_bytes(stable_user_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(payload_sql(), {"uid": stable_user_id})
        return int(cursor.fetchone()[0])


def reset_payload_sql_cache() -> None:
    """For tests and after migrations that add user-owned tables."""
    _existing_tables.cache_clear()
    payload_sql.cache_clear()


# --- rows in the user's own schema (mail, run records) ---------------------------------------

# Actor (table set) name -> SQL over that set's tables, run with the user's schema first on
# the search path, returning one bigint: the bytes its rows hold. Apps above this one register
# theirs in ``ready()``; reconciliation adds them to the public rows' bytes, so bytes an actor
# reserved on write survive the nightly reset.
_SCHEMA_PAYLOAD: dict[str, str] = {}


def register_schema_payload(actor: str, sql: str) -> None:
    _SCHEMA_PAYLOAD[actor] = sql


def schema_payload_bytes(stable_user_id: str) -> int:
    """What the user's per-user schema rows weigh, for the table sets the schema has. Runs
    inside a call on that user's schema (the meter's reconciliation)."""
    if not _SCHEMA_PAYLOAD:
        return 0
    from kody.userschema import tablesets
    from kody.userschema.models import UserSchema

    found = list(
        UserSchema.objects.filter(user_id=stable_user_id).values_list("table_sets", flat=True)
    )
    if not found:
        return 0  # no schema: nothing stored in one
    # NULL means every set. Two actors may share one set (JobManager writes RunLog's tables),
    # so what counts is whether the registered actor's tables exist, not whose call made them.
    held = tablesets.tables_of(found[0])
    declared = tablesets.sets()
    total = 0
    with connection.cursor() as cursor:
        for actor, sql in sorted(_SCHEMA_PAYLOAD.items()):
            if held is not None and not declared.get(actor, frozenset()) <= held:
                continue  # the set was never created: nothing stored there
            cursor.execute(sql)
            total += int(cursor.fetchone()[0] or 0)
    return total


# --- bucket estimates (check-only, never reserved into the meter) ----------------------------

Estimator = Callable[[str, str], int]  # (stable_user_id, storage_id) -> bytes
_ESTIMATORS: dict[str, Estimator] = {}


def register_bucket_estimator(kind: str, estimator: Estimator) -> None:
    """Apps that own a bucket kind (StorageRunner, repo sessions) register how to measure it."""
    _ESTIMATORS[kind] = estimator


def storage_buckets() -> Any:
    """The ``user_storage_buckets`` model. It belongs to packages, an app built on this one
    (its rows are StorageRunner buckets and repo-session workspaces), so it is looked up by
    name in Django's app registry rather than imported."""
    try:
        return django_apps.get_model("packages", "UserStorageBucket")
    except LookupError:
        # A registry narrowed to some apps (``apps.set_installed_apps``) still has the class
        # Django loaded at start-up, as an import would have found it.
        return django_apps.all_models["packages"]["userstoragebucket"]


def bucket_estimate_total(stable_user_id: str) -> int:
    UserStorageBucket = storage_buckets()

    total = UserStorageBucket.objects.filter(user_id=stable_user_id).aggregate(
        total=Sum("estimated_bytes")
    )["total"]
    return int(total or 0)


def backfill_bucket_estimates(*, batch: int = 100) -> int:
    """Measure buckets that have no estimate yet; returns how many were measured."""
    UserStorageBucket = storage_buckets()

    rows = list(
        UserStorageBucket.objects.filter(
            estimated_bytes__isnull=True, kind__in=list(_ESTIMATORS)
        ).order_by("last_seen_at", "id")[:batch]
    )
    measured = 0
    for row in rows:
        size = _ESTIMATORS[row.kind](row.user_id, row.storage_id)
        measured += UserStorageBucket.objects.filter(
            pk=row.pk, estimated_bytes__isnull=True
        ).update(estimated_bytes=size, estimated_bytes_updated_at=timezone.now())
    return measured
