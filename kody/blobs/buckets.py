from __future__ import annotations

import os
from collections.abc import Iterator

from django.core.files.storage import FileSystemStorage, Storage, storages

from config.buckets import BUCKETS

_S3_DELETE_BATCH = 1000  # the S3 DeleteObjects limit


def bucket(name: str) -> Storage:
    if name not in BUCKETS:
        raise KeyError(f"unknown bucket {name!r}; known: {', '.join(BUCKETS)}")
    return storages[name]


def _is_s3(storage: Storage) -> bool:
    return hasattr(storage, "bucket") and hasattr(storage, "bucket_name")


def list_prefix(name: str, prefix: str) -> Iterator[str]:
    """Yield every key under ``prefix`` (keys relative to the bucket's storage root)."""
    storage = bucket(name)
    if _is_s3(storage):
        location = storage.location.rstrip("/") + "/" if storage.location else ""
        for obj in storage.bucket.objects.filter(Prefix=location + prefix):
            yield obj.key[len(location) :]
        return
    assert isinstance(storage, FileSystemStorage)
    root = storage.location
    if not os.path.isdir(root):
        return
    # Walk only the directory that can hold the prefix, not the whole bucket.
    head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
    start = os.path.join(root, head)
    if not os.path.isdir(start):
        return
    for dirpath, _dirs, files in os.walk(start):
        for filename in files:
            key = os.path.relpath(os.path.join(dirpath, filename), root).replace(os.sep, "/")
            if key.startswith(prefix):
                yield key


def purge_prefix(name: str, prefix: str) -> int:
    """Delete every key under ``prefix``; idempotent, returns how many objects went away."""
    if not prefix:
        raise ValueError("refusing to purge an empty prefix (the whole bucket)")
    storage = bucket(name)
    keys = list(list_prefix(name, prefix))
    delete_keys(name, keys)
    if not _is_s3(storage):
        _remove_empty_dirs(storage, prefix)
    return len(keys)


def delete_keys(name: str, keys: list[str]) -> None:
    """Delete these keys (missing ones count as deleted): on S3 one DeleteObjects request per
    1,000 keys instead of one request per key."""
    storage = bucket(name)
    if _is_s3(storage):
        location = storage.location.rstrip("/") + "/" if storage.location else ""
        for start in range(0, len(keys), _S3_DELETE_BATCH):
            chunk = keys[start : start + _S3_DELETE_BATCH]
            answer = storage.bucket.delete_objects(
                Delete={"Objects": [{"Key": location + key} for key in chunk], "Quiet": True}
            )
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise OSError(f"blob delete failed: {first.get('Code')} {first.get('Message')}")
        return
    for key in keys:
        storage.delete(key)


def _remove_empty_dirs(storage: FileSystemStorage, prefix: str) -> None:
    if "/" not in prefix:
        return
    directory = os.path.join(storage.location, prefix.rsplit("/", 1)[0])
    while directory.startswith(storage.location) and directory != storage.location:
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = os.path.dirname(directory)


def object_version(name: str, key: str) -> tuple[int, str]:
    """``(size, version)`` of one object; the version changes whenever the bytes do
    (S3's ETag; on the filesystem, size and modification time). FileNotFoundError if absent."""
    storage = bucket(name)
    if _is_s3(storage):
        from botocore.exceptions import ClientError

        location = storage.location.rstrip("/") + "/" if storage.location else ""
        try:
            head = storage.bucket.meta.client.head_object(
                Bucket=storage.bucket_name, Key=location + key
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise FileNotFoundError(key) from exc
            raise
        return int(head["ContentLength"]), str(head["ETag"]).strip('"')
    assert isinstance(storage, FileSystemStorage)
    stat = os.stat(storage.path(key))
    return stat.st_size, f"{stat.st_size:x}-{stat.st_mtime_ns:x}"


def read_range(name: str, key: str, offset: int, length: int) -> bytes:
    """``length`` bytes of one object from ``offset`` (fewer at the end)."""
    storage = bucket(name)
    if _is_s3(storage):
        location = storage.location.rstrip("/") + "/" if storage.location else ""
        if length <= 0:
            return b""
        response = storage.bucket.meta.client.get_object(
            Bucket=storage.bucket_name,
            Key=location + key,
            Range=f"bytes={offset}-{offset + length - 1}",
        )
        return response["Body"].read()
    with storage.open(key, "rb") as handle:
        handle.seek(offset)
        return handle.read(length)


class BlobExists(FileExistsError):
    """``create_new`` found the key taken: nothing was written."""


def create_new(name: str, key: str, data: bytes) -> None:
    """Write ``key`` only if no object has it, atomically on every backend: a conditional
    ``PutObject`` (``If-None-Match: *``) on S3, which otherwise overwrites silently, and an
    exclusive create on disk. A taken key raises ``BlobExists`` and its bytes stay as they
    were, so a caller that cleans up after a failure deletes only objects it created."""
    storage = bucket(name)
    if _is_s3(storage):
        from botocore.exceptions import ClientError

        location = storage.location.rstrip("/") + "/" if storage.location else ""
        try:
            storage.bucket.meta.client.put_object(
                Bucket=storage.bucket_name, Key=location + key, Body=data, IfNoneMatch="*"
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise BlobExists(key) from exc
            raise
        return
    assert isinstance(storage, FileSystemStorage)
    path = storage.path(key)  # refuses a key that would leave the bucket's directory
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError as exc:
        raise BlobExists(key) from exc
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
    except BaseException:
        os.unlink(path)
        raise
