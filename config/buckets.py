"""STORAGES entries for the blob buckets (the original's R2 buckets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BUCKETS = (
    "email_blobs",
    "community_assets",
    "repo_session_blobs",
    "user_avatars",
    "source_repos",
    # Operator-owned: the nightly disaster-recovery export (kody/dr). Keep it access-controlled:
    # it holds every shared table, credentials' hashes included.
    "dr_exports",
)


def bucket_storage(
    name: str, *, use_s3: bool, endpoint_url: str, bucket_prefix: str, var_dir: Path
) -> dict[str, Any]:
    # Avatars live inside the community-assets bucket under ``user-avatars/`` (seed key format).
    bucket, location = (
        ("community_assets", "user-avatars") if name == "user_avatars" else (name, "")
    )
    if use_s3:
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket_prefix + bucket.replace("_", "-"),
                "endpoint_url": endpoint_url or None,
                "location": location,
                "file_overwrite": True,
                "default_acl": None,
                "querystring_auth": True,
            },
        }
    root = var_dir / "blobs" / bucket
    return {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(root / location) if location else str(root)},
    }


def bucket_storages(**kwargs: Any) -> dict[str, dict[str, Any]]:
    return {name: bucket_storage(name, **kwargs) for name in BUCKETS}
