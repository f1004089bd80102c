"""The blob buckets: key builders, and the same prefix operations on disk and on real S3.

The S3 path runs against moto in server mode over HTTP (a real S3 API on loopback), through
the exact STORAGES entries settings would build with ``KODY_STORAGE=s3``.
"""

from __future__ import annotations

import boto3
import pytest
from django.core.files.base import ContentFile
from django.test import override_settings

from config.buckets import bucket_storages
from kody import blobs
from kody.blobs.keys import InvalidBlobKey

USER_A = "a" * 64
USER_B = "b" * 64


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_buckets(s3_endpoint, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    for name in (
        "kody-test-email-blobs",
        "kody-test-community-assets",
        "kody-test-repo-session-blobs",
        "kody-test-source-repos",
    ):
        client.create_bucket(Bucket=name)
    storages_conf = bucket_storages(
        use_s3=True, endpoint_url=s3_endpoint, bucket_prefix="kody-test-", var_dir=tmp_path
    )
    with override_settings(
        STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            **storages_conf,
        }
    ):
        yield client


@pytest.fixture
def fs_buckets(tmp_path):
    storages_conf = bucket_storages(
        use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path
    )
    with override_settings(
        STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            **storages_conf,
        }
    ):
        yield tmp_path


def _write_mail_for_two_users() -> None:
    store = blobs.bucket("email_blobs")
    for user in (USER_A, USER_B):
        store.save(blobs.email_raw_key(user, "m1"), ContentFile(b"raw-1-" + user.encode()))
        store.save(blobs.email_raw_key(user, "m2"), ContentFile(b"raw-2"))
        store.save(blobs.email_attachment_key(user, "m1", "att1"), ContentFile(b"pdf"))


def _exercise_prefix_contract() -> None:
    _write_mail_for_two_users()
    store = blobs.bucket("email_blobs")
    with store.open(blobs.email_raw_key(USER_A, "m1")) as handle:
        assert handle.read() == b"raw-1-" + USER_A.encode()

    listed = sorted(blobs.list_prefix("email_blobs", blobs.email_raw_prefix(USER_A)))
    assert listed == [blobs.email_raw_key(USER_A, "m1"), blobs.email_raw_key(USER_A, "m2")]

    assert blobs.purge_prefix("email_blobs", blobs.email_raw_prefix(USER_A)) == 2
    assert list(blobs.list_prefix("email_blobs", blobs.email_raw_prefix(USER_A))) == []
    # The other user's blobs and the same user's other prefix are untouched.
    assert len(list(blobs.list_prefix("email_blobs", blobs.email_raw_prefix(USER_B)))) == 2
    assert store.exists(blobs.email_attachment_key(USER_A, "m1", "att1"))
    # Idempotent: a retried purge finds nothing and succeeds.
    assert blobs.purge_prefix("email_blobs", blobs.email_raw_prefix(USER_A)) == 0


def test_s3_write_read_list_and_purge_by_prefix(s3_buckets):
    _exercise_prefix_contract()
    raw = s3_buckets.list_objects_v2(Bucket="kody-test-email-blobs")["Contents"]
    assert {obj["Key"] for obj in raw} == {
        blobs.email_raw_key(USER_B, "m1"),
        blobs.email_raw_key(USER_B, "m2"),
        blobs.email_attachment_key(USER_A, "m1", "att1"),
        blobs.email_attachment_key(USER_B, "m1", "att1"),
    }


def test_s3_avatars_live_under_user_avatars_in_community_assets(s3_buckets):
    key = blobs.user_avatar_key(USER_A, "abc123", "webp")
    blobs.bucket("user_avatars").save(key, ContentFile(b"img"))
    objects = s3_buckets.list_objects_v2(Bucket="kody-test-community-assets")["Contents"]
    assert [obj["Key"] for obj in objects] == [f"user-avatars/{USER_A}/abc123.webp"]
    assert list(blobs.list_prefix("user_avatars", blobs.user_avatar_prefix(USER_A))) == [key]
    assert blobs.purge_prefix("user_avatars", blobs.user_avatar_prefix(USER_A)) == 1
    assert "Contents" not in s3_buckets.list_objects_v2(Bucket="kody-test-community-assets")


def test_filesystem_bucket_keeps_the_same_prefix_contract(fs_buckets):
    _exercise_prefix_contract()
    assert (fs_buckets / "blobs" / "email_blobs" / f"email-raw:v1:{USER_B}" / "m1").exists()


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "..", "x" * 300, "a\nb"])
def test_key_builders_refuse_segments_that_escape_the_owner_prefix(bad):
    with pytest.raises(InvalidBlobKey):
        blobs.email_raw_key(USER_A, bad)


def test_purge_refuses_the_empty_prefix(fs_buckets):
    with pytest.raises(ValueError):
        blobs.purge_prefix("email_blobs", "")


def _exercise_delete_keys(count: int) -> None:
    _write_mail_for_two_users()
    store = blobs.bucket("email_blobs")
    extra = [blobs.email_raw_key(USER_A, f"x{n}") for n in range(count)]
    for key in extra:
        store.save(key, ContentFile(b"x"))
    missing = blobs.email_raw_key(USER_A, "never-written")
    blobs.delete_keys("email_blobs", [*extra, blobs.email_raw_key(USER_A, "m1"), missing])
    assert list(blobs.list_prefix("email_blobs", blobs.email_raw_prefix(USER_A))) == [
        blobs.email_raw_key(USER_A, "m2")
    ]
    assert len(list(blobs.list_prefix("email_blobs", blobs.email_raw_prefix(USER_B)))) == 2
    assert store.exists(blobs.email_attachment_key(USER_A, "m1", "att1"))


def test_s3_delete_keys_batches_past_the_delete_objects_limit(s3_buckets):
    # 1,001 listed keys plus two more: two DeleteObjects requests; a missing key is no error.
    _exercise_delete_keys(1001)


def test_filesystem_delete_keys_deletes_exactly_the_listed_keys(fs_buckets):
    _exercise_delete_keys(3)
