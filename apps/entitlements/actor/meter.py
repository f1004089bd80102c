"""The UserMeter actor: a user's daily entitlement counters and storage/service authority.

Design note. Every method runs inside the kernel's per-user transaction, after the owner row
is locked, so each method sees and changes the meter alone: a check-and-increment is one
conditional UPDATE and can never overshoot a limit, however many callers race. A charge that
fits (``consume``'s hot path) is a single statement: its WITH clause also deletes counter and
claim rows older than the seven-day window, which is how every write path prunes without
paying an extra round trip; only a refusal or a missing row reads the row again. In a shard
batch the charge goes out with the batch's other calls as one statement that also answers a
refusal (``consume``'s statement form, ADR 0037). The reads
(``@reads``) run beside the writer in a read-only snapshot (``kody.actors.readonly``): they check
for rows past the window in the same statement and, finding any, ask the writer to prune
(``follow_up``), so every read path still prunes. A missing
(resource, day) row is a cold bootstrap: the zero row is
inserted if absent (concurrent bootstraps are harmless) — inside the same call by default, or
by the caller's ``initialize`` after a ``needs_bootstrap`` answer when it asks for that.
Write leases and the deletion fence have their tables here but belong to the deletion work.
"""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from apps.entitlements.actor import models as m
from apps.entitlements.actor.replies import (
    CounterRow,
    DeletionMark,
    DeletionState,
    InboundCharge,
    LeaseRepairFinalized,
    LeaseRepairPrepared,
    NeedsBootstrap,
    Purged,
    Reading,
    Refund,
    Snapshot,
    StorageBytes,
    StorageReconcile,
    StorageReservation,
    WriteLease,
    WriteLeaseAcquired,
    WriteLeaseReleased,
)
from kody.actors import Actor, Planned, Unanswered, deletion_safe, one_statement, reads
from kody.errors import AccountDeleting

USER_METER_VERSION = 12  # the original's UserMeter schema version this meter implements
RESOURCES = frozenset(
    {
        "email_sends_per_day",
        "email_receives_per_day",
        "execute_calls_per_day",
        "outbound_fetches_per_day",
        "job_runs_per_day",
    }
)
RETENTION_DAYS = 7  # rows more than seven UTC days older than the current day are pruned
SERVICE_STATUSES = frozenset({"running", "idle", "stopped", "error"})
SERVICE_MODES = frozenset({"bounded", "persistent"})
EXPORT_PAGE_MAX = 1000

COUNTERS = m.DailyCounter._meta.db_table
CLAIMS = m.InboundDeliveryClaim._meta.db_table
STORAGE = m.StorageBytesState._meta.db_table
SERVICES = m.PackageServiceState._meta.db_table
META = m.MeterMeta._meta.db_table
DELETION = m.DeletionState._meta.db_table
LEASES = m.AccountWriteLease._meta.db_table

_PRUNE = f"""
    pruned_counters AS (DELETE FROM {COUNTERS} WHERE day < %(cutoff)s),
    pruned_claims AS (DELETE FROM {CLAIMS} WHERE day < %(cutoff)s)"""

# What a read (``@reads``, which cannot delete) checks instead: is there anything to prune?
_STALE = f"""(EXISTS (SELECT 1 FROM {COUNTERS} WHERE day < %(cutoff)s)
    OR EXISTS (SELECT 1 FROM {CLAIMS} WHERE day < %(cutoff)s))"""

# The hot path: the prune and the charge, one statement. It answers a row only when it
# charged; a refusal or a missing day row (rare) costs a second, plain read (_CURRENT). One
# UPDATE … RETURNING instead of the former charge CTE joined to a re-read of the row: the
# server plans and runs less per call (benchmarks/README.md, issue 9 third pass).
_CONSUME = f"""
WITH {_PRUNE}
UPDATE {COUNTERS} SET count = count + %(amount)s, revision = revision + 1, updated_at = now()
 WHERE resource = %(resource)s AND day = %(day)s AND count + %(amount)s <= %(limit)s
RETURNING count, revision
"""

_CURRENT = f"SELECT count, revision FROM {COUNTERS} WHERE resource = %(resource)s AND day = %(day)s"

# ``consume`` as ONE statement that answers a refusal too (the statement form a batch sends
# with its other calls, ADR 0037): the charge, else the row as it stands. Every part of it
# reads the same snapshot, so the second branch sees the row the charge did not change. No
# row at all (the day's first call) answers nothing: the method bootstraps it.
# Given as its CTEs and its final query (``Planned``), so a lone call can carry its record in
# the same statement (ADR 0042); its rows are (allowed, count, revision), which JSON keeps.
_CONSUME_OR_CURRENT_CTES = f"""{_PRUNE},
    charged AS (
        UPDATE {COUNTERS} SET count = count + %(amount)s, revision = revision + 1,
               updated_at = now()
         WHERE resource = %(resource)s AND day = %(day)s AND count + %(amount)s <= %(limit)s
        RETURNING count, revision)"""
_CONSUME_OR_CURRENT_SELECT = f"""SELECT true AS allowed, count, revision FROM charged
UNION ALL
SELECT false, count, revision FROM {COUNTERS}
 WHERE resource = %(resource)s AND day = %(day)s AND NOT EXISTS (SELECT 1 FROM charged)
"""
_CONSUME_OR_CURRENT = f"WITH {_CONSUME_OR_CURRENT_CTES}\n{_CONSUME_OR_CURRENT_SELECT}"


class UnknownResource(ValueError):
    pass


def _consume_params(resource: str, day: str, limit: int, amount: int) -> dict[str, Any]:
    when = _day(day)
    return {
        "resource": _resource(resource),
        "day": when,
        "amount": _positive(amount),
        "limit": int(limit),
        "cutoff": _cutoff(when),
    }


def _plan_consume(
    resource: str, day: str, limit: int, amount: int = 1, bootstrap: bool = True
) -> Planned:
    params = _consume_params(resource, day, limit, amount)
    return Planned(_CONSUME_OR_CURRENT_CTES, _CONSUME_OR_CURRENT_SELECT, params)


def _answer_consume(
    rows: list[tuple], resource: str, day: str, limit: int, amount: int = 1, bootstrap: bool = True
) -> Reading:
    if not rows:
        raise Unanswered("no counter row for the day yet")
    allowed, count, revision = rows[0]
    return _reading(resource, _day(day), allowed, count, revision, limit)


def _charge(cursor: Any, params: dict[str, Any]) -> tuple[bool, tuple[int, int] | None]:
    """Whether ``_CONSUME`` charged, and the counter's (count, revision) after it: the charged
    row, else a plain read of it (None: no row for that day yet)."""
    cursor.execute(_CONSUME, params)
    charged = cursor.fetchone()
    if charged is not None:
        return True, charged
    cursor.execute(_CURRENT, params)
    return False, cursor.fetchone()


def _day(value: str) -> date:
    return date.fromisoformat(value)


def _cutoff(day: date) -> date:
    return day - timedelta(days=RETENTION_DAYS)


def _today() -> date:
    return timezone.now().date()


def _resource(name: str) -> str:
    if name not in RESOURCES:
        raise UnknownResource(name)
    return name


def _positive(amount: int) -> int:
    if not isinstance(amount, int) or amount < 1:
        raise ValueError("amount must be a positive integer")
    return amount


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _reading(
    resource: str, day: date, allowed: bool, count: int, revision: int, limit: int
) -> Reading:
    return {
        "resource": resource,
        "day": day.isoformat(),
        "allowed": allowed,
        "count": count,
        "limit": limit,
        "remaining": max(limit - count, 0),
        "revision": revision,
        "needs_bootstrap": False,
    }


def _needs_bootstrap(resource: str, day: date) -> NeedsBootstrap:
    return {"resource": resource, "day": day.isoformat(), "needs_bootstrap": True}


def _cursor_token(day: str, resource: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([day, resource]).encode()).decode()


def _cursor_position(token: str | None) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        day, resource = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(_day(day)), str(resource)
    except (ValueError, TypeError) as exc:
        raise ValueError("malformed export cursor") from exc


class UserMeter(Actor):
    name = "entitlements.UserMeter"

    # --- daily counters -------------------------------------------------------------------

    def initialize(self, resource: str, day: str, count: int = 0) -> dict[str, Any]:
        """Cold bootstrap of one (resource, day): insert-if-absent, then record the version."""
        when = _day(day)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {COUNTERS} (resource, day, count, revision, updated_at)"
                " VALUES (%s, %s, %s, 0, now()) ON CONFLICT DO NOTHING",
                [_resource(resource), when, max(0, int(count))],
            )
            created = cursor.rowcount == 1
            self._prune(cursor, when)
            self._record_version(cursor)
        return {"resource": resource, "day": when.isoformat(), "created": created}

    @one_statement(_plan_consume, _answer_consume)
    def consume(
        self, resource: str, day: str, limit: int, amount: int = 1, bootstrap: bool = True
    ) -> Reading | NeedsBootstrap:
        """Charge ``amount`` when it fits under ``limit`` (all or nothing).

        A day's first call finds no row: with ``bootstrap=False`` it answers
        ``needs_bootstrap`` (the caller then runs ``initialize``); by default the same
        insert-if-absent runs here, inside this call's transaction, and the charge is retried.
        In a batch it goes out as one statement with the batch's other calls when the day's
        row exists (``_CONSUME_OR_CURRENT``, ADR 0037).
        """
        when = _day(day)
        params = _consume_params(resource, day, limit, amount)
        with connection.cursor() as cursor:
            allowed, row = _charge(cursor, params)
            if row is None and bootstrap:
                self.initialize(resource, day)
                allowed, row = _charge(cursor, params)
        if row is None:
            return _needs_bootstrap(resource, when)
        return _reading(resource, when, allowed, row[0], row[1], limit)

    def refund(self, resource: str, day: str, amount: int = 1) -> Refund:
        when = _day(day)
        with connection.cursor() as cursor:
            self._prune(cursor, when)
            cursor.execute(
                f"UPDATE {COUNTERS} SET count = GREATEST(count - %s, 0), revision = revision + 1,"
                " updated_at = now() WHERE resource = %s AND day = %s RETURNING count, revision",
                [_positive(amount), _resource(resource), when],
            )
            row = cursor.fetchone()
        count, revision = row if row else (0, 0)
        return {"resource": resource, "day": when.isoformat(), "count": count, "revision": revision}

    @reads
    def read(self, resource: str, day: str) -> dict[str, Any]:
        when = _day(day)
        with connection.cursor() as cursor:
            self._prune_reading(cursor, when)
            cursor.execute(
                f"SELECT count, revision FROM {COUNTERS} WHERE resource = %s AND day = %s",
                [_resource(resource), when],
            )
            row = cursor.fetchone()
        if row is None:
            return {**_needs_bootstrap(resource, when), "count": 0, "revision": 0}
        return {
            "resource": resource,
            "day": when.isoformat(),
            "count": row[0],
            "revision": row[1],
            "needs_bootstrap": False,
        }

    @reads
    def read_day(self, day: str) -> dict[str, int]:
        """Every daily resource's count for one UTC day (missing rows read as zero)."""
        when = _day(day)
        with connection.cursor() as cursor:
            self._prune_reading(cursor, when)
            return {resource: 0 for resource in sorted(RESOURCES)} | self._counts(cursor, when)

    def consume_inbound_delivery(
        self,
        delivery_id: str,
        resource: str,
        day: str,
        limit: int,
        amount: int = 1,
        bootstrap: bool = True,
    ) -> InboundCharge:
        """Charge one inbound delivery once: a retry with the same id returns the first answer."""
        if not delivery_id:
            raise ValueError("delivery_id is required")
        when = _day(day)
        with connection.cursor() as cursor:
            # A claim older than the retention window counts as gone (``consume`` below prunes
            # it): one statement instead of a prune before the lookup.
            cursor.execute(
                f"SELECT resource, day, count_after, revision FROM {CLAIMS}"
                " WHERE delivery_id = %s AND day >= %s",
                [delivery_id, _cutoff(when)],
            )
            claimed = cursor.fetchone()
        if claimed is not None:
            reading = _reading(claimed[0], claimed[1], True, claimed[2], claimed[3], limit)
            return {**reading, "charged": False, "delivery_id": delivery_id}
        result = self.consume(resource, day, limit, amount, bootstrap=bootstrap)
        if result["needs_bootstrap"] or not result["allowed"]:
            return {**result, "charged": False, "delivery_id": delivery_id}
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {CLAIMS}"
                " (delivery_id, resource, day, count_after, revision, claimed_at)"
                " VALUES (%s, %s, %s, %s, %s, now())",
                [delivery_id, resource, when, result["count"], result["revision"]],
            )
        return {**result, "charged": True, "delivery_id": delivery_id}

    # --- storage bytes --------------------------------------------------------------------

    def initialize_storage_bytes(self) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {STORAGE} (id, bytes, revision, updated_at) VALUES (1, 0, 0, now())"
                " ON CONFLICT DO NOTHING"
            )
            created = cursor.rowcount == 1
            self._prune(cursor, _today())
            self._record_version(cursor)
        return {**self.read_storage_bytes(), "created": created}

    @reads
    def read_storage_bytes(self) -> StorageBytes:
        with connection.cursor() as cursor:
            self._prune_reading(cursor, _today())
            row = self._storage(cursor)
        if row is None:
            return {"bytes": 0, "revision": 0, "initialized": False, "updated_at": None}
        return {
            "bytes": row[0],
            "revision": row[1],
            "initialized": True,
            "updated_at": _iso(row[2]),
        }

    def reserve_storage_bytes(self, amount: int, limit: int) -> StorageReservation:
        """Add ``amount`` bytes if the total stays within ``limit``; a negative amount releases."""
        amount = int(amount)
        with connection.cursor() as cursor:
            self._prune(cursor, _today())
            cursor.execute(
                f"UPDATE {STORAGE} SET bytes = GREATEST(bytes + %(amount)s, 0),"
                " revision = revision + 1, updated_at = now()"
                " WHERE id = 1 AND (%(amount)s <= 0 OR bytes + %(amount)s <= %(limit)s)"
                " RETURNING bytes, revision",
                {"amount": amount, "limit": int(limit)},
            )
            charged = cursor.fetchone()
            current = charged or self._storage(cursor)
        if current is None:
            return {"needs_bootstrap": True, "allowed": False, "bytes": 0, "revision": 0}
        return {
            "needs_bootstrap": False,
            "allowed": charged is not None,
            "bytes": current[0],
            "revision": current[1],
            "limit": int(limit),
        }

    def set_storage_bytes(self, value: int, expected_revision: int | None = None) -> dict[str, Any]:
        """Absolute set from reconciliation; with ``expected_revision``, only if unchanged (CAS)."""
        if int(value) < 0:
            raise ValueError("storage bytes cannot be negative")
        with connection.cursor() as cursor:
            self._prune(cursor, _today())
            cursor.execute(
                f"INSERT INTO {STORAGE} (id, bytes, revision, updated_at)"
                " VALUES (1, %(v)s, 1, now())"
                f" ON CONFLICT (id) DO UPDATE SET bytes = %(v)s, revision = {STORAGE}.revision + 1,"
                f" updated_at = now() WHERE %(rev)s::bigint IS NULL OR {STORAGE}.revision = %(rev)s"
                " RETURNING bytes, revision",
                {"v": int(value), "rev": expected_revision},
            )
            applied = cursor.fetchone()
            current = applied or self._storage(cursor)
        return {"set": applied is not None, "bytes": current[0], "revision": current[1]}

    def reconcile_storage_bytes(self) -> StorageReconcile:
        """Recompute payload bytes from the owner's public rows and set them, atomically.

        Runs under the owner lock, so no reservation can interleave between the measurement
        and the write (the original needed a compare-and-set across two stores for this).
        """
        from apps.entitlements.services.storage import payload_bytes

        before = self.read_storage_bytes()
        measured = payload_bytes(self.user_id)
        after = self.set_storage_bytes(measured)
        return {"bytes": measured, "previous": before["bytes"], "revision": after["revision"]}

    # --- package service liveness ---------------------------------------------------------

    def upsert_package_service_state(
        self,
        package_id: str,
        service_name: str,
        status: str,
        mode: str = "persistent",
        started_at: str | None = None,
        source_updated_at: str | None = None,
    ) -> dict[str, Any]:
        if status not in SERVICE_STATUSES or mode not in SERVICE_MODES:
            raise ValueError("unknown service status or mode")
        with connection.cursor() as cursor:
            self._prune(cursor, _today())
            cursor.execute(
                f"INSERT INTO {SERVICES} (package_id, service_name, status, mode, started_at,"
                " source_updated_at, revision, updated_at) VALUES (%s, %s, %s, %s, %s,"
                " COALESCE(%s::timestamptz, now()), 1, now())"
                " ON CONFLICT (package_id, service_name) DO UPDATE SET status = EXCLUDED.status,"
                " mode = EXCLUDED.mode, started_at = EXCLUDED.started_at,"
                f" source_updated_at = EXCLUDED.source_updated_at,"
                f" revision = {SERVICES}.revision + 1, updated_at = now() RETURNING revision",
                [package_id, service_name, status, mode, started_at, source_updated_at],
            )
            revision = cursor.fetchone()[0]
        return {"package_id": package_id, "service_name": service_name, "revision": revision}

    def delete_package_service_state(self, package_id: str, service_name: str) -> dict[str, Any]:
        with connection.cursor() as cursor:
            self._prune(cursor, _today())
            cursor.execute(
                f"DELETE FROM {SERVICES} WHERE package_id = %s AND service_name = %s",
                [package_id, service_name],
            )
            return {"deleted": cursor.rowcount}

    @reads
    def list_package_service_states(self, package_id: str | None = None) -> list[dict[str, Any]]:
        with connection.cursor() as cursor:
            self._prune_reading(cursor, _today())
            cursor.execute(
                f"SELECT package_id, service_name, status, mode, started_at, source_updated_at,"
                f" revision FROM {SERVICES} WHERE %(p)s::text IS NULL OR package_id = %(p)s"
                " ORDER BY package_id, service_name",
                {"p": package_id},
            )
            rows = cursor.fetchall()
        keys = (
            "package_id",
            "service_name",
            "status",
            "mode",
            "started_at",
            "source_updated_at",
            "revision",
        )
        return [
            {k: (_iso(v) if isinstance(v, datetime) else v) for k, v in zip(keys, row, strict=True)}
            for row in rows
        ]

    @reads
    def count_package_service_states(
        self,
        status: str = "running",
        mode: str | None = None,
        exclude_package_id: str | None = None,
        exclude_service_name: str | None = None,
        fresh_seconds: int | None = None,
    ) -> int:
        """Services in ``status`` (optionally one mode, fresh within a window, minus one)."""
        with connection.cursor() as cursor:
            self._prune_reading(cursor, _today())
            cursor.execute(
                f"SELECT COUNT(*) FROM {SERVICES} WHERE status = %(s)s"
                " AND (%(m)s::text IS NULL OR mode = %(m)s)"
                " AND (%(fresh)s::int IS NULL"
                "      OR source_updated_at >= now() - make_interval(secs => %(fresh)s))"
                " AND NOT (package_id IS NOT DISTINCT FROM %(xp)s"
                "          AND service_name IS NOT DISTINCT FROM %(xs)s)",
                {
                    "s": status,
                    "m": mode,
                    "fresh": fresh_seconds,
                    "xp": exclude_package_id,
                    "xs": exclude_service_name,
                },
            )
            return int(cursor.fetchone()[0])

    def bootstrap_package_service_states(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Seed liveness rows that do not exist yet (cold start from an enumeration index)."""
        inserted = 0
        with connection.cursor() as cursor:
            for row in rows:
                cursor.execute(
                    f"INSERT INTO {SERVICES} (package_id, service_name, status, mode, started_at,"
                    " source_updated_at, revision, updated_at) VALUES (%s, %s, %s, %s, %s,"
                    " COALESCE(%s::timestamptz, now()), 1, now()) ON CONFLICT DO NOTHING",
                    [
                        row["package_id"],
                        row["service_name"],
                        row.get("status", "running"),
                        row.get("mode", "persistent"),
                        row.get("started_at"),
                        row.get("source_updated_at"),
                    ],
                )
                inserted += cursor.rowcount
        return {"inserted": inserted}

    # --- reads for the account UI, export, purge ------------------------------------------

    @reads
    def snapshot(self, day: str, counts: list[str] | None = None) -> Snapshot:
        """Everything the usage page needs from the meter, in one call and ONE statement (rows
        to prune?, the day's counters, stored bytes, service counts); ``counts``: the
        registered schema counts of other actors to take with it (``counters``), answered
        under ``"counts"`` (a name with no schema count is left out)."""
        from apps.entitlements.services.counters import schema_count_sql

        when = _day(day)
        asked = [(name, schema_count_sql(name)) for name in counts or ()]
        asked = [(name, sql) for name, sql in asked if sql]
        extra = "".join(f", ({sql})" for _, sql in asked)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {_STALE},"
                f" (SELECT json_object_agg(resource, count) FROM {COUNTERS} WHERE day = %(day)s),"
                f" (SELECT bytes FROM {STORAGE} WHERE id = 1),"
                f" (SELECT COUNT(*) FROM {SERVICES} WHERE status = 'running'),"
                f" (SELECT COUNT(*) FROM {SERVICES} WHERE status = 'running'"
                f"  AND mode = 'persistent'){extra}",
                {"cutoff": _cutoff(when), "day": when},
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
            self._prune_reading(cursor, _today())
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
            self._prune(db, _today())
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
                        "updated_at": _iso(updated),
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

    # --- write leases and the deletion fence (seed 002) --------------------------------------

    def acquire_write_lease(self, token: str, holder: str, at: str) -> WriteLeaseAcquired:
        """Take a lease for one guarded mutation; refused once the account is being deleted.

        Idempotent per token (a retried acquire answers from the same row)."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT deleting_at FROM {DELETION} WHERE id = 1")
            tombstone = cursor.fetchone()
            if tombstone and tombstone[0] is not None:
                raise AccountDeleting()
            cursor.execute(
                f"INSERT INTO {LEASES} (token, holder, acquired_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (token) DO NOTHING",
                [str(token)[:255], str(holder)[:255], datetime.fromisoformat(at)],
            )
        return {"token": token, "held": True}

    def write_lease_held(self, token: str) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {LEASES} WHERE token = %s", [token])
            held = cursor.fetchone() is not None
            cursor.execute(f"SELECT deleting_at FROM {DELETION} WHERE id = 1")
            tombstone = cursor.fetchone()
        return {"held": held, "deleting": bool(tombstone and tombstone[0] is not None)}

    @deletion_safe
    def release_write_lease(self, token: str) -> WriteLeaseReleased:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {LEASES} WHERE token = %s", [token])
            released = cursor.rowcount == 1
        return {"released": released}

    @deletion_safe
    def mark_deleting(self, at: str) -> DeletionMark:
        """Stamp the tombstone (never moves an earlier stamp) and count leases still held."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {DELETION} (id, deleting_at) VALUES (1, %s) ON CONFLICT (id)"
                " DO UPDATE SET deleting_at ="
                f" COALESCE({DELETION}.deleting_at, EXCLUDED.deleting_at)",
                [datetime.fromisoformat(at)],
            )
            cursor.execute(f"SELECT COUNT(*) FROM {LEASES}")
            held = cursor.fetchone()[0]
        return {"marked": True, "active_write_leases": held}

    @deletion_safe
    def unmark_deleting(self) -> DeletionMark:
        """Release the fence when a deletion is abandoned and the account is kept."""
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {DELETION} SET deleting_at = NULL WHERE id = 1")
        return {"marked": False}

    @deletion_safe
    def list_write_leases(self) -> list[WriteLease]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT token, holder, acquired_at, pending_repair_id FROM {LEASES}"
                " ORDER BY acquired_at, token"
            )
            return [
                {"token": t, "holder": h, "acquired_at": _iso(a), "pending_repair_id": r}
                for t, h, a, r in cursor.fetchall()
            ]

    @deletion_safe
    def prepare_lease_repair(self, token: str, repair_id: str) -> LeaseRepairPrepared:
        """Step one of an operator repair: tag the lease; idempotent for the same repair id."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {LEASES} SET pending_repair_id = %s WHERE token = %s"
                " AND (pending_repair_id IS NULL OR pending_repair_id = %s)"
                " RETURNING holder, acquired_at",
                [repair_id, token, repair_id],
            )
            row = cursor.fetchone()
            if row is None:
                cursor.execute(f"SELECT pending_repair_id FROM {LEASES} WHERE token = %s", [token])
                other = cursor.fetchone()
                return {"prepared": False, "reason": "repair_pending" if other else "not_found"}
        return {"prepared": True, "holder": row[0], "acquired_at": _iso(row[1])}

    @deletion_safe
    def finalize_lease_repair(self, token: str, repair_id: str) -> LeaseRepairFinalized:
        """Step two, after the audit row is written: drop the lease the repair prepared."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {LEASES} WHERE token = %s AND pending_repair_id = %s",
                [token, repair_id],
            )
            removed = cursor.rowcount == 1
        return {"finalized": removed}

    @deletion_safe
    def read_deletion_state(self) -> DeletionState:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT deleting_at FROM {DELETION} WHERE id = 1")
            row = cursor.fetchone()
            cursor.execute(f"SELECT COUNT(*) FROM {LEASES}")
            leases = cursor.fetchone()[0]
        return {"deleting_at": _iso(row[0]) if row else None, "active_write_leases": leases}

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
        cutoff = _cutoff(_day(day) if day else _today())
        deleted = {}
        with connection.cursor() as cursor:
            for table in (COUNTERS, CLAIMS):
                cursor.execute(f"DELETE FROM {table} WHERE day < %s", [cutoff])
                deleted[table] = cursor.rowcount
        return deleted

    def alarm(self) -> None:
        self.prune()

    # --- helpers (not callable through the queue) -----------------------------------------

    def _prune(self, cursor: Any, day: date) -> None:
        cursor.execute(f"WITH {_PRUNE} SELECT 1", {"cutoff": _cutoff(day)})

    def _prune_reading(self, cursor: Any, day: date) -> None:
        """A read path's prune: a check, and when there are rows past the window, the prune
        asked for with ``follow_up`` (cast to the writer after a ``@reads`` call, done at once
        when the method runs as the writer) — as ``snapshot`` does in its one statement."""
        cursor.execute(f"SELECT {_STALE}", {"cutoff": _cutoff(day)})
        if cursor.fetchone()[0]:
            self.follow_up("prune", day=day.isoformat())

    def _record_version(self, cursor: Any) -> None:
        cursor.execute(
            f"INSERT INTO {META} (key, value) VALUES ('schema_version', %s)"
            f" ON CONFLICT (key) DO UPDATE SET value = GREATEST({META}.value, EXCLUDED.value)",
            [USER_METER_VERSION],
        )

    def _counts(self, cursor: Any, day: date) -> dict[str, int]:
        cursor.execute(f"SELECT resource, count FROM {COUNTERS} WHERE day = %s", [day])
        return {resource: int(count) for resource, count in cursor.fetchall()}

    def _storage(self, cursor: Any) -> tuple[int, int, datetime] | None:
        cursor.execute(f"SELECT bytes, revision, updated_at FROM {STORAGE} WHERE id = 1")
        return cursor.fetchone()

    def _first_page_extras(self, cursor: Any) -> dict[str, Any]:
        storage = self._storage(cursor)
        cursor.execute(f"SELECT deleting_at FROM {DELETION} WHERE id = 1")
        tombstone = cursor.fetchone()
        cursor.execute(f"SELECT COUNT(*) FROM {LEASES}")
        leases = cursor.fetchone()[0]
        extras: dict[str, Any] = {
            "storage_bytes_state": (
                {"bytes": storage[0], "revision": storage[1], "updated_at": _iso(storage[2])}
                if storage
                else None
            ),
            # Sanitized: whether deletion is under way and how many writers hold leases, never
            # the lease tokens or holders.
            "deletion_state": {
                "deleting_at": _iso(tombstone[0]) if tombstone else None,
                "active_write_leases": leases,
            },
        }
        return extras
