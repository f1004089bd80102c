"""The durable key-value store: one ``public`` table, optional expiry, prefix deletes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from kody.kv import keys
from kody.kv.models import KvEntry


class NotYourKey(PermissionError):
    """A user-scoped read or delete named a key that belongs to another user."""


def _live() -> Q:
    return Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())


@contextmanager
def locked(key: str) -> Iterator[None]:
    """A transaction in which nobody else holding ``locked(key)`` runs: for a read, change and
    write of one entry (an upsert alone cannot merge two writers' changes). A transaction-scoped
    advisory lock, so it also covers a key that has no row yet."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["kv:" + key])
        yield


def get(key: str) -> bytes | None:
    value = KvEntry.objects.filter(_live(), key=key).values_list("value", flat=True).first()
    return None if value is None else bytes(value)


def get_json(key: str) -> Any:
    raw = get(key)
    return None if raw is None else json.loads(raw)


def put(key: str, value: bytes | str, *, ttl: timedelta | None = None) -> None:
    data = value.encode() if isinstance(value, str) else value
    expires_at = timezone.now() + ttl if ttl is not None else None
    KvEntry.objects.bulk_create(
        [KvEntry(key=key, value=data, expires_at=expires_at)],
        update_conflicts=True,
        unique_fields=["key"],
        update_fields=["value", "expires_at", "updated_at"],
    )


def put_json(key: str, value: Any, *, ttl: timedelta | None = None) -> None:
    put(key, json.dumps(value, separators=(",", ":")), ttl=ttl)


def delete(key: str) -> bool:
    deleted, _ = KvEntry.objects.filter(key=key).delete()
    return deleted > 0


def delete_prefix(prefix: str) -> int:
    if not prefix:
        raise ValueError("refusing to delete every key")
    deleted, _ = KvEntry.objects.filter(key__startswith=prefix).delete()
    return deleted


def _check_owner(user_id: str, key: str) -> None:
    if keys.owner_of(key) != user_id:
        raise NotYourKey(f"key is not scoped to user {user_id}")


def get_owned(user_id: str, key: str) -> bytes | None:
    _check_owner(user_id, key)
    return get(key)


def delete_owned(user_id: str, key: str) -> bool:
    _check_owner(user_id, key)
    return delete(key)


def delete_user_keys(user_id: str) -> int:
    return sum(delete_prefix(prefix) for prefix in keys.user_prefixes(user_id))


def purge_expired(limit: int) -> int:
    doomed = KvEntry.objects.filter(expires_at__lte=timezone.now()).values_list("key", flat=True)
    deleted, _ = KvEntry.objects.filter(key__in=list(doomed[:limit])).delete()
    return deleted
