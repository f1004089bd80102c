"""Blob buckets (the original's R2 buckets) and their canonical key builders.

Each bucket is a Django storage named in ``settings.STORAGES``: the filesystem under ``var/``
by default, S3 through django-storages when configured. Keys keep the original formats so a
key is self-describing about its owner; builders validate their inputs so a caller can never
build a key that escapes its owner's prefix.
"""

from kody.blobs.buckets import (
    BlobExists,
    bucket,
    create_new,
    delete_keys,
    list_prefix,
    purge_prefix,
)
from kody.blobs.keys import (
    community_icon_key,
    email_attachment_key,
    email_attachment_prefix,
    email_raw_key,
    email_raw_prefix,
    identity_icon_key,
    repo_session_prefix,
    user_avatar_key,
    user_avatar_prefix,
)

__all__ = [
    "BlobExists",
    "bucket",
    "community_icon_key",
    "create_new",
    "delete_keys",
    "email_attachment_key",
    "email_attachment_prefix",
    "email_raw_key",
    "email_raw_prefix",
    "identity_icon_key",
    "list_prefix",
    "purge_prefix",
    "repo_session_prefix",
    "user_avatar_key",
    "user_avatar_prefix",
]
