"""``blobstore.put`` on a storage that overwrites (S3's ``file_overwrite``, a filesystem's
``allow_overwrite``): one save, and a second put of the same key still leaves one object."""

from __future__ import annotations

import pytest

from apps.mailbox.services import blobstore
from kody.blobs import list_prefix


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_second_put_replaces_the_object_under_the_same_key(settings, tmp_path, overwrite):
    options = {"location": str(tmp_path / "blobs")}
    if overwrite:
        options["allow_overwrite"] = True
    settings.STORAGES = {
        **settings.STORAGES,
        "email_blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": options,
        },
    }
    blobstore.put("email-raw:v1:u1/m1", b"first")
    blobstore.put("email-raw:v1:u1/m1", b"second")
    assert blobstore.get("email-raw:v1:u1/m1") == b"second"
    assert sorted(list_prefix("email_blobs", "email-raw:v1:u1/")) == ["email-raw:v1:u1/m1"]
