"""The export's ``r2_object`` section: the user's blobs, one chunk of one object per page.

Which blobs are the user's comes from the prefixes declared in
``apps.accounts.out_of_band_surfaces`` (``export=True``), placeholders filled from the user's
id or the user's own listings and repos. Objects go in (bucket, key) order, each in chunks of at
most ``R2_CHUNK_BYTES``; the cursor binds bucket, key, size and version, so an object that
changed between pages is reported (``object_changed``) instead of mixing generations.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import connection

from apps.accounts.export.cursors import InvalidCursor, seal, unseal
from apps.accounts.out_of_band_surfaces import OUT_OF_BAND_SURFACES
from apps.accounts.ownership import Owner, quote
from kody.blobs import buckets
from kody.errors import KodyError

R2_CHUNK_BYTES = 256 * 1024


class ObjectChanged(KodyError):
    code = "object_changed"
    status = 409
    message = "The object changed between pages; restart it from the beginning."


@dataclass(frozen=True)
class BlobPrefix:
    bucket: str
    prefix: str


# Placeholders of exported blob prefixes scoped by a row rather than the user: each is filled
# from the user's own rows (table, id column, owner column), as deletion finds them.
SCOPED_PLACEHOLDERS = {
    "{listingId}": ("community_listings", "id", "owner_user_id"),
    "{repoId}": ("entity_sources", "repo_id", "user_id"),
}


def blob_prefixes(owner: Owner) -> list[BlobPrefix]:
    """The owner's blob prefixes declared in ``surfaces.py``, placeholders filled in: the
    user's id, or the ids of the user's own listings and repos."""
    prefixes = []
    for surface in OUT_OF_BAND_SURFACES:
        if surface.kind != "blob_prefix" or not surface.export:
            continue
        bucket = surface.extra["bucket"]
        if "{userId}" in surface.name:
            prefixes.append(BlobPrefix(bucket, surface.name.replace("{userId}", owner.stable_id)))
            continue
        for placeholder, (table, column, owner_column) in SCOPED_PLACEHOLDERS.items():
            if placeholder in surface.name:
                for value in _owned_ids(table, column, owner_column, owner):
                    prefixes.append(BlobPrefix(bucket, surface.name.replace(placeholder, value)))
    return prefixes


def _owned_ids(table: str, column: str, owner_column: str, owner: Owner) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote(column)} FROM {quote(table)} WHERE {quote(owner_column)} = %s"
            f" ORDER BY {quote(column)}",
            [owner.stable_id],
        )
        # An id with a slash could widen the prefix past its own objects: never list by it.
        return [row[0] for row in cursor.fetchall() if row[0] and "/" not in row[0]]


def iter_blobs(owner: Owner) -> Iterator[tuple[str, str]]:
    for prefix in blob_prefixes(owner):
        for key in sorted(buckets.list_prefix(prefix.bucket, prefix.prefix)):
            yield prefix.bucket, key


def blob_page(owner: Owner, cursor: str | None) -> dict:
    """One chunk of one object; objects in (bucket, key) order, chunks by offset."""
    position = unseal(owner, "r2_object", cursor)
    if position is None:
        first = next(iter_blobs(owner), None)
        if first is None:
            return {"section": "r2_object", "object": None, "nextCursor": None}
        bucket, key = first
        offset, version = 0, None
    else:
        bucket, key, offset, version = position
        if not _is_owned(owner, bucket, key):
            raise InvalidCursor()
    try:
        size, current = buckets.object_version(bucket, key)
    except FileNotFoundError:
        return {
            "section": "r2_object",
            "object": {"bucket": bucket, "key": key, "missing": True},
            "nextCursor": _next_object(owner, bucket, key),
        }
    if version is not None and version != [size, current]:
        raise ObjectChanged(details={"bucket": bucket, "key": key})
    data = buckets.read_range(bucket, key, offset, R2_CHUNK_BYTES)
    end = offset + len(data)
    if end < size:
        next_cursor = seal(owner, "r2_object", [bucket, key, end, [size, current]])
    else:
        next_cursor = _next_object(owner, bucket, key)
    return {
        "section": "r2_object",
        "object": {
            "bucket": bucket,
            "key": key,
            "size": size,
            "version": current,
            "offset": offset,
            "final": end >= size,
            "chunk": base64.b64encode(data).decode("ascii"),
        },
        "nextCursor": next_cursor,
    }


def _next_object(owner: Owner, bucket: str, key: str) -> str | None:
    for candidate in iter_blobs(owner):
        if candidate > (bucket, key):
            return seal(owner, "r2_object", [candidate[0], candidate[1], 0, None])
    return None


def _is_owned(owner: Owner, bucket: str, key: str) -> bool:
    return any(p.bucket == bucket and key.startswith(p.prefix) for p in blob_prefixes(owner))
