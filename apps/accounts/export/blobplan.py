"""Which blobs an archive may bring, and under which keys — rebuilt here, never read.

A file ``blobs/<bucket>/<key>`` is accepted only if ``<key>`` parses as one of the exported
key families of the archive's own account (``surfaces.py``): its raw mail and attachments,
its avatar, the icons of the community listings and repos the import brings. The key it is
written under is built again by ``kody.blobs.keys`` from the imported account's ids, so a key
naming another account, another listing or a path outside the family refuses the import.
Every rebuilt key must be free on this instance; the write itself is create-only too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.accounts.export.archive import Archive, ImportRefused
from apps.accounts.importing import ImportContext
from kody import blobs
from kody.blobs.keys import InvalidBlobKey


@dataclass(frozen=True)
class PlannedBlob:
    bucket: str
    key: str  # rebuilt for the imported account
    source: str  # the archive file holding the bytes


_SEG = r"([^/]+)"


def plan_blobs(
    archive: Archive, ctx: ImportContext, listing_ids: set[str], repo_ids: set[str]
) -> list[PlannedBlob]:
    planned = []
    for bucket, key, source in archive.blobs():
        try:
            new_key = _rebuild(bucket, key, ctx, listing_ids, repo_ids)
        except InvalidBlobKey:
            new_key = None
        if new_key is None:
            raise ImportRefused(
                f"{source[:200]} is not a blob key of the exported account's own prefixes"
            )
        planned.append(PlannedBlob(bucket, new_key, source))
    for blob in planned:
        if blobs.bucket(blob.bucket).exists(blob.key):
            raise ImportRefused(f"blob {blob.bucket}/{blob.key} already exists here")
    return planned


def _rebuild(
    bucket: str, key: str, ctx: ImportContext, listing_ids: set[str], repo_ids: set[str]
) -> str | None:
    old = re.escape(ctx.old_id)
    if bucket == "email_blobs":
        if found := re.fullmatch(rf"email-raw:v1:{old}/{_SEG}", key):
            return blobs.email_raw_key(ctx.new_id, found[1])
        if found := re.fullmatch(rf"email-attachment:v1:{old}/{_SEG}/{_SEG}", key):
            return blobs.email_attachment_key(ctx.new_id, found[1], found[2])
    elif bucket == "user_avatars":
        if found := re.fullmatch(rf"{old}/{_SEG}\.([a-z0-9]{{1,8}})", key):
            return blobs.user_avatar_key(ctx.new_id, found[1], found[2])
    elif bucket == "community_assets":
        if found := re.fullmatch(rf"community-icon:v3/{_SEG}/{_SEG}/asset", key):
            if found[1] in listing_ids:
                return blobs.community_icon_key(found[1], found[2])
        if found := re.fullmatch(rf"identity-icon:v1/{_SEG}/{_SEG}/asset", key):
            if found[1] in repo_ids:
                return blobs.identity_icon_key(found[1], found[2])
    return None


def avatar_key(value: object, ctx: ImportContext) -> str | None:
    """``users.avatar_key`` rebuilt for the imported account, if its bytes come along."""
    if not value:
        return None
    if not isinstance(value, str):
        raise ImportRefused("users.avatar_key is not a key")
    try:
        rebuilt = _rebuild("user_avatars", value, ctx, set(), set())
    except InvalidBlobKey:
        rebuilt = None
    if rebuilt is None:
        raise ImportRefused("users.avatar_key is not a key of the exported account's avatars")
    if f"blobs/user_avatars/{value}" not in ctx.archive.files:
        ctx.warn("users.avatar_key: the avatar's bytes are not in the export; avatar cleared")
        return None
    return rebuilt
