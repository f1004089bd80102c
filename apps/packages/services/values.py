"""Plain values an agent keeps for its person, in buckets by scope (user, app, session).

A user-scoped value has no binding key; app and session values are bound to the app id or
session id the caller names. Every read and write is scoped by the owner's stable user id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.accounts import policy
from apps.packages.models import ValueBucket, ValueEntry
from apps.packages.models.secrets import ValueScope
from kody.errors import InvalidInput, NotFound


class ValueNotFound(NotFound):
    code = "value_not_found"
    message = "No value with that name."


def bucket_key(scope: str, binding_key: str | None) -> str:
    if scope == ValueScope.USER:
        if binding_key:
            raise InvalidInput(
                "A user-scoped value takes no bindingKey.", details={"field": "bindingKey"}
            )
        return ""
    if not binding_key:
        raise InvalidInput(
            f"A {scope}-scoped value needs a bindingKey.", details={"field": "bindingKey"}
        )
    return binding_key


def _live_bucket(user_id: str, scope: str, key: str) -> ValueBucket | None:
    bucket = ValueBucket.objects.filter(user_id=user_id, scope=scope, binding_key=key).first()
    if bucket is not None and bucket.expires_at and bucket.expires_at <= timezone.now():
        return None
    return bucket


def to_json(entry: ValueEntry, bucket: ValueBucket) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "description": entry.description,
        "scope": bucket.scope,
        "bindingKey": bucket.binding_key or None,
        "updatedAt": entry.updated_at.isoformat(),
    }


def set_value(
    user_id: str,
    *,
    name: str,
    value: str,
    description: str = "",
    scope: str = ValueScope.USER,
    binding_key: str | None = None,
    expires_at: datetime | None = None,
) -> dict[str, Any]:
    key = bucket_key(scope, binding_key)
    with transaction.atomic():
        bucket, _ = ValueBucket.objects.get_or_create(user_id=user_id, scope=scope, binding_key=key)
        before = ValueEntry.objects.select_for_update().filter(bucket=bucket, name=name).first()
        grown = entry_bytes(name, value, description) - (
            entry_bytes(before.name, before.value, before.description) if before else 0
        )
        # Reserve first: over the plan's storage_bytes this raises the coded limit error and
        # the transaction stores nothing (not even a new bucket).
        policy.reserve_storage_bytes(user_id, grown)
        try:
            if scope == ValueScope.SESSION and expires_at is not None:
                bucket.expires_at = expires_at
                bucket.save(update_fields=["expires_at", "updated_at"])
            entry, _ = ValueEntry.objects.update_or_create(
                bucket=bucket, name=name, defaults={"value": value, "description": description}
            )
        except BaseException:
            policy.release_storage_bytes(user_id, grown)
            raise
        if grown < 0:
            freed = -grown
            transaction.on_commit(lambda: policy.release_storage_bytes(user_id, freed))
    return to_json(entry, bucket)


def entry_bytes(name: str, value: str, description: str) -> int:
    """What a value weighs against storage_bytes: its text, UTF-8 encoded. Reconciliation
    measures whole rows and corrects the small difference nightly."""
    return len(name.encode()) + len(value.encode()) + len(description.encode())


def get_value(
    user_id: str, *, name: str, scope: str = ValueScope.USER, binding_key: str | None = None
) -> dict[str, Any]:
    bucket = _live_bucket(user_id, scope, bucket_key(scope, binding_key))
    entry = bucket and ValueEntry.objects.filter(bucket=bucket, name=name).first()
    if not entry:
        raise ValueNotFound(details={"name": name})
    return to_json(entry, bucket)


def list_values(
    user_id: str, *, scope: str = ValueScope.USER, binding_key: str | None = None
) -> list[dict[str, Any]]:
    bucket = _live_bucket(user_id, scope, bucket_key(scope, binding_key))
    if bucket is None:
        return []
    return [to_json(e, bucket) for e in ValueEntry.objects.filter(bucket=bucket).order_by("name")]


def delete_value(
    user_id: str, *, name: str, scope: str = ValueScope.USER, binding_key: str | None = None
) -> bool:
    key = bucket_key(scope, binding_key)
    with transaction.atomic():
        doomed = ValueEntry.objects.select_for_update().filter(
            bucket__user_id=user_id, bucket__scope=scope, bucket__binding_key=key, name=name
        )
        freed = sum(entry_bytes(e.name, e.value, e.description) for e in doomed)
        deleted, _ = doomed.delete()
        if not deleted:
            raise ValueNotFound(details={"name": name})
        transaction.on_commit(lambda: policy.release_storage_bytes(user_id, freed))
    return True
