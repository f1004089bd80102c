"""Every writer that grows a person's stored bytes is metered against storage_bytes: bucket
storage (``storageSet``) and sealed secrets (``secretSet``/``secretSetMany``) are refused with
the coded limit error over the plan's limit and store nothing; deleting gives the room back."""

from __future__ import annotations

import pytest

from apps.entitlements.plans import limit_for
from apps.entitlements.services import metering
from apps.entitlements.services.enforcement import current_use
from apps.jobs.actor.storage import StorageRunner
from apps.packages.models import SecretBucket, SecretEntry, UserStorageBucket
from apps.packages.services import crypto

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

BUCKET = "job:nightly-report"


@pytest.fixture(autouse=True)
def fresh_keyring():  # type: ignore[no-untyped-def]
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


def stored(user) -> int:  # type: ignore[no-untyped-def]
    return int(metering.read_storage_bytes(user.stable_user_id)["bytes"])


def used(user) -> int:  # type: ignore[no-untyped-def]
    return int(current_use(user.stable_user_id, "storage_bytes") or 0)


def fill_to(user, room: int) -> int:  # type: ignore[no-untyped-def]
    """Reserve everything but ``room`` bytes of the person's plan; returns the limit."""
    limit = limit_for(user.plan, "storage_bytes")
    metering.reserve_storage_bytes(user.stable_user_id, limit - used(user) - room, limit)
    assert used(user) == limit - room
    return limit


def entries(user) -> list[str]:  # type: ignore[no-untyped-def]
    rows = StorageRunner.call(user.stable_user_id, "list_values", BUCKET, "", None, 100)
    return [e["key"] for e in rows["entries"]]


def test_bucket_writes_count_and_over_the_limit_nothing_is_stored(as_owner, owner):
    as_owner.call("storageSet", storageId=BUCKET, key="first", value={"n": 1})
    estimate = UserStorageBucket.objects.get(user_id=owner.stable_user_id).estimated_bytes
    assert estimate and used(owner) == estimate
    assert stored(owner) == 0  # the hold is given back once the estimate carries the bytes

    fill_to(owner, 200)
    error = as_owner.error("storageSet", 429, storageId=BUCKET, key="big", value="x" * 500)
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "storage_bytes"
    assert entries(owner) == ["first"]
    assert UserStorageBucket.objects.get(user_id=owner.stable_user_id).estimated_bytes == estimate
    # Overwriting a key with something no bigger needs no room.
    as_owner.call("storageSet", storageId=BUCKET, key="first", value={"n": 2})


def test_deleting_a_bucket_key_releases_its_bytes(as_owner, owner):
    as_owner.call("storageSet", storageId=BUCKET, key="big", value="x" * 400)
    fill_to(owner, 100)
    as_owner.error("storageSet", 429, storageId=BUCKET, key="other", value="y" * 300)
    as_owner.call("storageDelete", storageId=BUCKET, key="big")
    assert not UserStorageBucket.objects.filter(user_id=owner.stable_user_id).exists()
    as_owner.call("storageSet", storageId=BUCKET, key="other", value="y" * 300)
    assert entries(owner) == ["other"]


def test_bucket_meter_is_per_person(as_owner, owner, as_outsider, outsider):
    fill_to(owner, 10)
    as_owner.error("storageSet", 429, storageId=BUCKET, key="k", value="x" * 100)
    as_outsider.call("storageSet", storageId=BUCKET, key="k", value="x" * 100)
    assert entries(outsider) == ["k"] and entries(owner) == []


def test_secrets_reserve_their_sealed_bytes_and_deletes_release(
    as_owner, owner, django_capture_on_commit_callbacks
):
    as_owner.call("secretSet", name="API_KEY", value="v" * 40, description="d")
    weight = stored(owner)
    # Sealed text is longer than the plaintext; the description and name count too.
    assert weight > len("API_KEY") + 40 + 1
    with django_capture_on_commit_callbacks(execute=True):
        as_owner.call("secretDelete", name="API_KEY")
    assert stored(owner) == 0


def test_a_secret_over_the_storage_limit_is_refused_and_nothing_is_stored(
    as_owner, owner, as_outsider, outsider
):
    fill_to(owner, 50)
    error = as_owner.error("secretSet", 429, name="BIG", value="v" * 200)
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "storage_bytes"
    assert not SecretEntry.objects.filter(bucket__user_id=owner.stable_user_id).exists()
    assert not SecretBucket.objects.filter(user_id=owner.stable_user_id).exists()
    # A batch is all or nothing: the small one is not saved either.
    as_owner.error(
        "secretSetMany",
        429,
        secrets=[{"name": "SMALL", "value": "v"}, {"name": "BIG", "value": "v" * 200}],
    )
    assert not SecretEntry.objects.filter(bucket__user_id=owner.stable_user_id).exists()
    assert used(owner) == limit_for(owner.plan, "storage_bytes") - 50
    # Another person's meter is their own.
    as_outsider.call("secretSet", name="BIG", value="v" * 200)
    assert SecretEntry.objects.filter(bucket__user_id=outsider.stable_user_id).count() == 1
