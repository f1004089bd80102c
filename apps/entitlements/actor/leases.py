"""The UserMeter's write leases and deletion fence: a guarded mutation holds a lease, and
once the account is marked for deletion no new lease is granted (seed 002)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from apps.entitlements.actor.common import DELETION, LEASES, MeterPart, iso
from apps.entitlements.actor.replies import (
    DeletionMark,
    DeletionState,
    LeaseRepairFinalized,
    LeaseRepairPrepared,
    WriteLease,
    WriteLeaseAcquired,
    WriteLeaseReleased,
)
from kody.actors import deletion_safe
from kody.errors import AccountDeleting


class WriteLeases(MeterPart):
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
                {"token": t, "holder": h, "acquired_at": iso(a), "pending_repair_id": r}
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
        return {"prepared": True, "holder": row[0], "acquired_at": iso(row[1])}

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
        return {"deleting_at": iso(row[0]) if row else None, "active_write_leases": leases}
