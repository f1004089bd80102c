"""The UserMeter actor: a user's daily entitlement counters and storage/service authority.

Design note. Every method runs inside the kernel's per-user transaction, after the owner row
is locked, so each method sees and changes the meter alone. Its parts, one module each:
daily counters and the charge (``daily``), storage bytes and service liveness
(``storage``), write leases and the deletion fence (``leases``); this module adds the reads
for the account UI, export and purge. Every write path prunes counter and claim rows older
than the seven-day window in the same statement or transaction; the reads (``@reads``) run
beside the writer in a read-only snapshot, check for such rows and, finding any, ask the
writer to prune (``follow_up``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db import connection

from apps.entitlements.actor.common import (
    CLAIMS,
    COUNTERS,
    DELETION,
    EXPORT_PAGE_MAX,
    LEASES,
    META,
    RESOURCES,
    SERVICES,
    STALE,
    STORAGE,
    USER_METER_VERSION,
    UnknownResource,
    cutoff_of,
    day_of,
    iso,
    today,
)
from apps.entitlements.actor.daily import DailyCounters
from apps.entitlements.actor.leases import WriteLeases
from apps.entitlements.actor.replies import CounterRow, Purged, Snapshot
from apps.entitlements.actor.storage import PackageServices, StorageBytesPart
from kody.actors import Actor, deletion_safe, reads

__all__ = ["RESOURCES", "USER_METER_VERSION", "UnknownResource", "UserMeter"]


def _cursor_token(day: str, resource: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([day, resource]).encode()).decode()


def _cursor_position(token: str | None) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        day, resource = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(day_of(day)), str(resource)
    except (ValueError, TypeError) as exc:
        raise ValueError("malformed export cursor") from exc


class UserMeter(DailyCounters, StorageBytesPart, PackageServices, WriteLeases, Actor):
    name = "entitlements.UserMeter"

    @reads
    def snapshot(self, day: str, counts: list[str] | None = None) -> Snapshot:
        """Everything the usage page needs from the meter, in one call and ONE statement (rows
        to prune?, the day's counters, stored bytes, service counts); ``counts``: the
        registered schema counts of other actors to take with it (``counters``), answered
        under ``"counts"`` (a name with no schema count is left out)."""
        from apps.entitlements.services.counters import schema_count_sql

        when = day_of(day)
        asked = [(name, schema_count_sql(name)) for name in counts or ()]
        asked = [(name, sql) for name, sql in asked if sql]
        extra = "".join(f", ({sql})" for _, sql in asked)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {STALE},"
                f" (SELECT json_object_agg(resource, count) FROM {COUNTERS} WHERE day = %(day)s),"
                f" (SELECT bytes FROM {STORAGE} WHERE id = 1),"
                f" (SELECT COUNT(*) FROM {SERVICES} WHERE status = 'running'),"
                f" (SELECT COUNT(*) FROM {SERVICES} WHERE status = 'running'"
                f"  AND mode = 'persistent'){extra}",
                {"cutoff": cutoff_of(when), "day": when},
            )
            stale, found, stored, running, persistent, *extras = cursor.fetchone()
        if stale:
            self.follow_up("prune", day=when.isoformat())
        daily = {resource: 0 for resource in sorted(RESOURCES)}
        daily |= {resource: int(count) for resource, count in (found or {}).items()}
        reply: Snapshot = {
            "day": when.isoformat(),
            "daily": daily,
            "storage_bytes": stored or 0,
            "package_services": {"running": running, "persistent_running": persistent},
        }
        if asked:
            reply["counts"] = {name: int(n) for (name, _), n in zip(asked, extras, strict=True)}
        return reply

    @reads
    def daily_history(self) -> list[CounterRow]:
        """Every retained daily counter row (the operator parity view; meter-only counts)."""
        with connection.cursor() as cursor:
            self._prune_reading(cursor, today())
            cursor.execute(
                f"SELECT day, resource, count, revision FROM {COUNTERS} ORDER BY day, resource"
            )
            return [
                {"day": day.isoformat(), "resource": resource, "count": count, "revision": revision}
                for day, resource, count, revision in cursor.fetchall()
            ]

    @deletion_safe
    def export_counters(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """One page of daily counters, keyset by (day, resource); meter state on page one."""
        limit = max(1, min(int(limit), EXPORT_PAGE_MAX))
        after = _cursor_position(cursor)
        with connection.cursor() as db:
            self._prune(db, today())
            db.execute(
                f"SELECT day, resource, count, revision, updated_at FROM {COUNTERS}"
                " WHERE %(d)s::date IS NULL OR (day, resource) > (%(d)s::date, %(r)s)"
                " ORDER BY day, resource LIMIT %(n)s",
                {
                    "d": after[0] if after else None,
                    "r": after[1] if after else None,
                    "n": limit + 1,
                },
            )
            rows = db.fetchall()
            page: dict[str, Any] = {
                "schema_version": USER_METER_VERSION,
                "counters": [
                    {
                        "day": day.isoformat(),
                        "resource": res,
                        "count": count,
                        "revision": revision,
                        "updated_at": iso(updated),
                    }
                    for day, res, count, revision, updated in rows[:limit]
                ],
            }
            more = len(rows) > limit
            last = rows[limit - 1] if more else None
            page["next_cursor"] = _cursor_token(last[0].isoformat(), last[1]) if last else None
            if after is None:
                page.update(self._first_page_extras(db))
        return page

    @deletion_safe
    def purge(self) -> Purged:
        """Delete every meter row of this user; an existing deletion tombstone survives."""
        deleted: dict[str, int] = {}
        with connection.cursor() as cursor:
            for table in (COUNTERS, CLAIMS, STORAGE, SERVICES, LEASES):
                cursor.execute(f"DELETE FROM {table}")
                deleted[table] = cursor.rowcount
            cursor.execute(f"DELETE FROM {DELETION} WHERE deleting_at IS NULL")
        return {
            "deleted": deleted,
            "tombstone_kept": self.read_deletion_state()["deleting_at"] is not None,
        }

    @reads
    def schema_info(self) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT value FROM {META} WHERE key = 'schema_version'")
            row = cursor.fetchone()
        return {"schema_version": row[0] if row else None, "current": USER_METER_VERSION}

    def prune(self, day: str | None = None) -> dict[str, int]:
        """Delete counters and claims past the window of ``day`` (default today): every
        write path does this too, and a read that finds rows to prune asks for it."""
        cutoff = cutoff_of(day_of(day) if day else today())
        deleted = {}
        with connection.cursor() as cursor:
            for table in (COUNTERS, CLAIMS):
                cursor.execute(f"DELETE FROM {table} WHERE day < %s", [cutoff])
                deleted[table] = cursor.rowcount
        return deleted

    def alarm(self) -> None:
        self.prune()

    def _first_page_extras(self, cursor: Any) -> dict[str, Any]:
        storage = self._storage(cursor)
        cursor.execute(f"SELECT deleting_at FROM {DELETION} WHERE id = 1")
        tombstone = cursor.fetchone()
        cursor.execute(f"SELECT COUNT(*) FROM {LEASES}")
        leases = cursor.fetchone()[0]
        extras: dict[str, Any] = {
            "storage_bytes_state": (
                {"bytes": storage[0], "revision": storage[1], "updated_at": iso(storage[2])}
                if storage
                else None
            ),
            # Sanitized: whether deletion is under way and how many writers hold leases, never
            # the lease tokens or holders.
            "deletion_state": {
                "deleting_at": iso(tombstone[0]) if tombstone else None,
                "active_write_leases": leases,
            },
        }
        return extras
