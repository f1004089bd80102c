"""StorageRunner buckets for surfaces: read, write, list and export one bucket of the caller."""

from __future__ import annotations

import re
from typing import Any

from apps.accounts import policy
from apps.jobs.actor.storage import MAX_KEY, MAX_VALUE_BYTES, StorageRunner, _size
from kody.errors import InvalidInput

# exec:{uuid}, job:{jobId}, job:package-job:{packageId}:{name}, package:{id}, service:{...},
# and the package-app forms {packageId}:facet:{name} / {packageId}:{export}:{name}.
STORAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~%:@/+-]{0,511}")


class InvalidStorageId(InvalidInput):
    code = "invalid_storage_id"
    message = "That is not a storage id."


# Inventory ids of what is not a StorageRunner bucket (published sources, pushed packs,
# repo-session workspaces): a bucket under one of them would overwrite, then delete, that
# inventory row and so take its bytes out of the storage estimate.
NOT_BUCKETS = ("source:", "git:", "repo-session:")


def check_storage_id(storage_id: str) -> str:
    if not STORAGE_ID.fullmatch(storage_id or "") or storage_id.startswith(NOT_BUCKETS):
        raise InvalidStorageId(details={"storageId": storage_id})
    return storage_id


def get(user_id: str, storage_id: str, key: str) -> dict[str, Any]:
    return StorageRunner.call(user_id, "get_value", check_storage_id(storage_id), key)


def put(user_id: str, storage_id: str, key: str, value: Any) -> dict[str, Any]:
    if not key or len(key) > MAX_KEY:
        raise InvalidInput(f"A key has 1 to {MAX_KEY} characters.")
    if value is None:
        raise InvalidInput("A value is JSON other than null; storageDelete removes a key.")
    if _size(key, value) > MAX_VALUE_BYTES:
        raise InvalidInput("A value is at most 1 MiB of JSON.")
    check_storage_id(storage_id)
    # Bucket bytes count against storage_bytes through the bucket's estimate, which the write
    # itself refreshes. The growth is held in the meter while the write runs, so the plan's
    # limit is checked atomically (two concurrent writes cannot both slip under it); over the
    # limit this raises the coded limit error and nothing is written. Once the write has
    # landed the estimate carries the bytes and the hold is given back; a delete shrinks the
    # estimate, which is the release.
    grown = int(StorageRunner.call(user_id, "growth", storage_id, key, value))
    policy.reserve_storage_bytes(user_id, grown)
    try:
        return StorageRunner.call(user_id, "set_value", storage_id, key, value)
    finally:
        policy.release_storage_bytes(user_id, grown)


def delete(user_id: str, storage_id: str, key: str) -> dict[str, Any]:
    return StorageRunner.call(user_id, "delete_value", check_storage_id(storage_id), key)


def list_keys(
    user_id: str, storage_id: str, prefix: str = "", cursor: str | None = None, limit: int = 100
) -> dict[str, Any]:
    return StorageRunner.call(
        user_id, "list_values", check_storage_id(storage_id), prefix, cursor, limit
    )


def export(
    user_id: str, storage_id: str, cursor: str | None = None, page_size: int = 100
) -> dict[str, Any]:
    try:
        return StorageRunner.call(
            user_id, "export_bucket", check_storage_id(storage_id), cursor, page_size
        )
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("That cursor is not one this export gave out.") from None


def estimate(user_id: str, storage_id: str) -> int:
    return int(StorageRunner.call(user_id, "estimated_bytes", storage_id))
