"""The UserMeter's storage bytes (reservations against a limit, reconciliation) and its
package services' liveness rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from apps.entitlements.actor.common import (
    SERVICE_MODES,
    SERVICE_STATUSES,
    SERVICES,
    STORAGE,
    MeterPart,
    iso,
    today,
)
from apps.entitlements.actor.replies import StorageBytes, StorageReconcile, StorageReservation
from kody.actors import reads


class StorageBytesPart(MeterPart):
    user_id: str

    def initialize_storage_bytes(self) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {STORAGE} (id, bytes, revision, updated_at) VALUES (1, 0, 0, now())"
                " ON CONFLICT DO NOTHING"
            )
            created = cursor.rowcount == 1
            self._prune(cursor, today())
            self._record_version(cursor)
        return {**self.read_storage_bytes(), "created": created}

    @reads
    def read_storage_bytes(self) -> StorageBytes:
        with connection.cursor() as cursor:
            self._prune_reading(cursor, today())
            row = self._storage(cursor)
        if row is None:
            return {"bytes": 0, "revision": 0, "initialized": False, "updated_at": None}
        return {
            "bytes": row[0],
            "revision": row[1],
            "initialized": True,
            "updated_at": iso(row[2]),
        }

    def reserve_storage_bytes(self, amount: int, limit: int) -> StorageReservation:
        """Add ``amount`` bytes if the total stays within ``limit``; a negative amount releases."""
        amount = int(amount)
        with connection.cursor() as cursor:
            self._prune(cursor, today())
            cursor.execute(
                f"UPDATE {STORAGE} SET bytes = GREATEST(bytes + %(amount)s, 0),"
                " revision = revision + 1, updated_at = now()"
                " WHERE id = 1 AND (%(amount)s <= 0 OR bytes + %(amount)s <= %(limit)s)"
                " RETURNING bytes, revision",
                {"amount": amount, "limit": int(limit)},
            )
            return self._reservation(cursor, cursor.fetchone(), limit)

    def _reservation(self, cursor: Any, charged: tuple | None, limit: int) -> StorageReservation:
        """The reply to a reservation: ``charged`` is the UPDATE's row, None when refused."""
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

    def reserve_storage_bytes_with_buckets(self, amount: int, limit: int) -> StorageReservation:
        """``reserve_storage_bytes`` for a writer inside another actor's call for this user
        (the Mailbox): the user's bucket estimates are taken off ``limit`` in the same
        statement, as the enforcement service does with a read of its own, and there is no
        prune — one statement on the hot path instead of three."""
        from apps.entitlements.services.storage import storage_buckets

        amount = int(amount)
        buckets = storage_buckets()._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {STORAGE} SET bytes = GREATEST(bytes + %(amount)s, 0),"
                " revision = revision + 1, updated_at = now()"
                " WHERE id = 1 AND (%(amount)s <= 0 OR bytes + %(amount)s <= %(limit)s"
                f" - (SELECT COALESCE(SUM(estimated_bytes), 0) FROM {buckets}"
                "     WHERE user_id = %(uid)s))"
                " RETURNING bytes, revision",
                {"amount": amount, "limit": int(limit), "uid": self.user_id},
            )
            return self._reservation(cursor, cursor.fetchone(), limit)

    def set_storage_bytes(self, value: int, expected_revision: int | None = None) -> dict[str, Any]:
        """Absolute set from reconciliation; with ``expected_revision``, only if unchanged (CAS)."""
        if int(value) < 0:
            raise ValueError("storage bytes cannot be negative")
        with connection.cursor() as cursor:
            self._prune(cursor, today())
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
        """Recompute payload bytes from the owner's public rows and the rows of their own
        schema that writers reserve (``register_schema_payload``), and set them, atomically.

        Runs under the owner lock, so no reservation can interleave between the measurement
        and the write (the original needed a compare-and-set across two stores for this).
        """
        from apps.entitlements.services.storage import payload_bytes, schema_payload_bytes

        before = self.read_storage_bytes()
        measured = payload_bytes(self.user_id) + schema_payload_bytes(self.user_id)
        after = self.set_storage_bytes(measured)
        return {"bytes": measured, "previous": before["bytes"], "revision": after["revision"]}


class PackageServices(MeterPart):
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
            self._prune(cursor, today())
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
            self._prune(cursor, today())
            cursor.execute(
                f"DELETE FROM {SERVICES} WHERE package_id = %s AND service_name = %s",
                [package_id, service_name],
            )
            return {"deleted": cursor.rowcount}

    @reads
    def list_package_service_states(self, package_id: str | None = None) -> list[dict[str, Any]]:
        with connection.cursor() as cursor:
            self._prune_reading(cursor, today())
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
            {k: (iso(v) if isinstance(v, datetime) else v) for k, v in zip(keys, row, strict=True)}
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
            self._prune_reading(cursor, today())
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
