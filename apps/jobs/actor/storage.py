"""StorageRunner: a user's key/value buckets, one per storage id (SCHEMA.md §2.6).

The original had one Durable Object per ``[userId, storageId]``; here every bucket of a user
is a slice of one table in that user's schema, so two users with the same storage id can never
meet. Storage ids keep the original's stable forms (``exec:{uuid}``, ``job:{jobId}``,
``package:{packageId}``, ``service:…``); the prefix decides ``user_storage_buckets.kind``.
Each write refreshes the bucket's row in that public inventory (same transaction) with the
bucket's estimated bytes, so the storage estimate counts real data.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from apps.jobs.actor import models as m
from kody.actors import Actor, deletion_safe, reads

MAX_KEY = 512
MAX_VALUE_BYTES = 1024 * 1024
ROW_OVERHEAD = 64  # a rough per-entry cost beside key and value


def bucket_kind(storage_id: str) -> str:
    prefix = storage_id.split(":", 1)[0]
    return {"job": "job", "exec": "execute", "package": "package", "service": "service"}.get(
        prefix, "unknown"
    )


def _size(key: str, value: Any) -> int:
    return len(key.encode()) + len(json.dumps(value, separators=(",", ":")).encode())


class StorageRunner(Actor):
    name = "jobs.StorageRunner"
    tables = (m.StorageEntry,)

    @reads
    def get_value(self, storage_id: str, key: str) -> dict[str, Any]:
        row = m.StorageEntry.objects.filter(storage_id=storage_id, key=key).first()
        return {"found": row is not None, "value": row.value if row else None}

    @reads
    def growth(self, storage_id: str, key: str, value: Any) -> int:
        """How many bytes writing ``value`` under ``key`` would add to the bucket's estimate
        (negative when it shrinks); what the write reserves against ``storage_bytes``."""
        before = m.StorageEntry.objects.filter(storage_id=storage_id, key=key).first()
        old = before.bytes + ROW_OVERHEAD if before else 0
        return _size(key, value) + ROW_OVERHEAD - old

    def set_value(self, storage_id: str, key: str, value: Any) -> dict[str, Any]:
        _put(storage_id, key, value)
        return {"bytes": self._inventory(storage_id)}

    def delete_value(self, storage_id: str, key: str) -> dict[str, Any]:
        deleted = m.StorageEntry.objects.filter(storage_id=storage_id, key=key).delete()[0]
        return {"deleted": deleted > 0, "bytes": self._inventory(storage_id)}

    @reads
    def list_values(
        self, storage_id: str, prefix: str = "", cursor: str | None = None, limit: int = 100
    ) -> dict[str, Any]:
        return self._page(storage_id, prefix, cursor, limit, with_values=False)

    def clear_bucket(self, storage_id: str) -> dict[str, Any]:
        deleted = m.StorageEntry.objects.filter(storage_id=storage_id).delete()[0]
        self._inventory(storage_id)
        return {"deleted": deleted}

    @reads
    def bucket_rows(self, storage_id: str, limit: int) -> list[list[Any]]:
        """Up to ``limit`` + 1 (key, value) pairs of the bucket, for ``storageQuery``."""
        rows = m.StorageEntry.objects.filter(storage_id=storage_id).order_by("key")
        return [[r.key, r.value] for r in rows[: limit + 1]]

    @reads
    def estimated_bytes(self, storage_id: str) -> int:
        return _bucket_bytes(storage_id)

    def export_bucket(
        self, storage_id: str, cursor: str | None = None, limit: int = 100
    ) -> dict[str, Any]:
        return self._page(storage_id, "", cursor, limit, with_values=True)

    def _page(
        self, storage_id: str, prefix: str, cursor: str | None, limit: int, *, with_values: bool
    ) -> dict[str, Any]:
        rows = m.StorageEntry.objects.filter(storage_id=storage_id)
        if prefix:
            rows = rows.filter(key__startswith=prefix)
        if cursor:
            rows = rows.filter(key__gt=_decode(cursor))
        found = list(rows.order_by("key")[: limit + 1])
        page = found[:limit]
        entries = [
            {"key": e.key, "value": e.value, "updatedAt": e.updated_at.isoformat()}
            if with_values
            else {"key": e.key, "bytes": e.bytes, "updatedAt": e.updated_at.isoformat()}
            for e in page
        ]
        more = len(found) > limit
        return {"entries": entries, "nextCursor": _encode(page[-1].key) if more else None}

    def _inventory(self, storage_id: str) -> int:
        """Keep ``user_storage_buckets`` in step with this bucket (same transaction)."""
        from apps.packages.models import UserStorageBucket

        size = _bucket_bytes(storage_id)
        now = timezone.now()
        if size == 0:
            UserStorageBucket.objects.filter(user_id=self.user_id, storage_id=storage_id).delete()
            return 0
        UserStorageBucket.objects.update_or_create(
            user_id=self.user_id,
            storage_id=storage_id,
            defaults={
                "kind": bucket_kind(storage_id),
                "last_seen_at": now,
                "estimated_bytes": size,
                "estimated_bytes_updated_at": now,
            },
        )
        return size

    @deletion_safe
    def export_storage(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """Every bucket's entries, keyset-paged by (storage id, key)."""
        rows = m.StorageEntry.objects.all()
        if cursor:
            storage_id, key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
            rows = rows.filter(storage_id__gt=storage_id) | rows.filter(
                storage_id=storage_id, key__gt=key
            )
        found = list(rows.order_by("storage_id", "key")[: limit + 1])
        page = found[:limit]
        next_cursor = None
        if len(found) > limit:
            raw = json.dumps([page[-1].storage_id, page[-1].key]).encode()
            next_cursor = base64.urlsafe_b64encode(raw).decode()
        return {
            "entries": [{"storageId": e.storage_id, "key": e.key, "value": e.value} for e in page],
            "next_cursor": next_cursor,
        }

    def import_storage(self, page: dict[str, Any]) -> dict[str, Any]:
        """Restore one ``export_storage`` page (``import_account``): each entry as a write, so
        the buckets' inventory rows follow; running the same page twice changes nothing."""
        touched: set[str] = set()
        for entry in page.get("entries", []):
            _put(entry["storageId"], entry["key"], entry["value"])
            touched.add(entry["storageId"])
        for storage_id in sorted(touched):
            self._inventory(storage_id)
        return {"imported": {"storage_entries": len(page.get("entries", []))}}

    @deletion_safe
    def purge(self) -> dict[str, Any]:
        return {"deleted": {"storage_entries": m.StorageEntry.objects.all().delete()[0]}}


def _put(storage_id: str, key: str, value: Any) -> None:
    m.StorageEntry.objects.update_or_create(
        storage_id=storage_id,
        key=key,
        defaults={"value": value, "bytes": _size(key, value), "updated_at": timezone.now()},
    )


def _bucket_bytes(storage_id: str) -> int:
    total = m.StorageEntry.objects.filter(storage_id=storage_id).aggregate(n=Sum("bytes"))["n"]
    count = m.StorageEntry.objects.filter(storage_id=storage_id).count()
    return int(total or 0) + ROW_OVERHEAD * count


def _encode(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode()


def _decode(cursor: str) -> str:
    return base64.urlsafe_b64decode(cursor.encode()).decode()
