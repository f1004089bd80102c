"""Raw MIME and attachment bytes in the ``email_blobs`` bucket (the original's EMAIL_BLOBS R2).

Writes overwrite: a redelivery writes the same canonical key again, so a retry can never leave
a second object behind. Every storage failure surfaces as ``BlobUnavailable`` (retryable).
"""

from __future__ import annotations

from django.core.files.base import ContentFile

from apps.mailbox.errors import BlobUnavailable
from kody.blobs import bucket

BUCKET = "email_blobs"


def _overwrites(storage: object) -> bool:
    """Whether ``save`` replaces an object already at the key (S3 with ``file_overwrite``, a
    filesystem with ``allow_overwrite``) instead of saving under another name."""
    return bool(
        getattr(storage, "file_overwrite", False) or getattr(storage, "_allow_overwrite", False)
    )


def put(key: str, data: bytes) -> None:
    storage = bucket(BUCKET)
    try:
        # One PUT where the storage overwrites; otherwise (the filesystem default) the old
        # object goes first, or ``save`` would pick another name.
        if not _overwrites(storage) and storage.exists(key):
            storage.delete(key)
        saved = storage.save(key, ContentFile(data))
    except Exception as exc:  # filesystem OSError, boto ClientError: all retryable
        raise BlobUnavailable(details={"operation": "put"}) from exc
    if saved != key:  # a concurrent writer raced us to the name; keep exactly one object
        storage.delete(saved)
        raise BlobUnavailable(details={"operation": "put"})


def get(key: str) -> bytes:
    storage = bucket(BUCKET)
    try:
        with storage.open(key, "rb") as handle:
            return handle.read()
    except FileNotFoundError as exc:
        raise BlobUnavailable(
            "The stored message is missing.", details={"operation": "get"}
        ) from exc
    except Exception as exc:  # filesystem OSError, boto ClientError: all retryable
        raise BlobUnavailable(details={"operation": "get"}) from exc


def delete(key: str) -> None:
    """Idempotent: a missing object counts as deleted."""
    try:
        bucket(BUCKET).delete(key)
    except FileNotFoundError:
        return
    except Exception as exc:  # filesystem OSError, boto ClientError: all retryable
        raise BlobUnavailable(details={"operation": "delete"}) from exc


def exists(key: str) -> bool:
    return bucket(BUCKET).exists(key)
