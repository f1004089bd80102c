"""Values are metered against storage_bytes: a write reserves the bytes it adds, a delete or a
smaller overwrite gives them back, and a write over the limit is refused with nothing stored."""

from __future__ import annotations

import pytest

from apps.entitlements.plans import limit_for
from apps.entitlements.services import metering
from apps.packages.models import McpMemory, ValueBucket, ValueEntry

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def stored(user) -> int:  # type: ignore[no-untyped-def]
    return int(metering.read_storage_bytes(user.stable_user_id)["bytes"])


def test_writes_reserve_and_deletes_release(as_owner, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        as_owner.call("valueSet", name="city", value="Lisbon", description="where")
    assert stored(owner) == len("city") + len("Lisbon") + len("where")

    with django_capture_on_commit_callbacks(execute=True):
        as_owner.call("valueSet", name="city", value="Lisboa, Portugal", description="where")
    assert stored(owner) == len("city") + len("Lisboa, Portugal") + len("where")

    with django_capture_on_commit_callbacks(execute=True):
        as_owner.call("valueSet", name="city", value="é", description="")
    assert stored(owner) == len("city") + len("é".encode())

    with django_capture_on_commit_callbacks(execute=True):
        as_owner.call("valueDelete", name="city")
    assert stored(owner) == 0


def test_a_write_over_the_storage_limit_is_refused_and_stores_nothing(
    as_owner, owner, outsider, as_outsider
):
    limit = limit_for(owner.plan, "storage_bytes")
    metering.reserve_storage_bytes(owner.stable_user_id, limit - 10, limit)
    error = as_owner.error("valueSet", 429, name="big", value="x" * 64)
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "storage_bytes"
    assert not ValueEntry.objects.filter(bucket__user_id=owner.stable_user_id).exists()
    assert not ValueBucket.objects.filter(user_id=owner.stable_user_id).exists()
    assert stored(owner) == limit - 10
    # Small writes still fit, and another person's meter is their own.
    as_owner.call("valueSet", name="ok", value="x")
    as_outsider.call("valueSet", name="big", value="x" * 64)
    assert stored(outsider) == len("big") + 64


def test_memories_reserve_their_text_and_refuse_past_the_limit(
    as_owner, owner, django_capture_on_commit_callbacks
):
    memory = as_owner.call("memoryUpsert", subject="Tea", summary="Likes green tea")["memory"]
    assert stored(owner) == len("Tea") + len("Likes green tea")
    with django_capture_on_commit_callbacks(execute=True):
        as_owner.call("memoryUpsert", memoryId=memory["id"], subject="Tea", summary="Likes tea")
    assert stored(owner) == len("Tea") + len("Likes tea")

    limit = limit_for(owner.plan, "storage_bytes")
    metering.reserve_storage_bytes(owner.stable_user_id, limit - stored(owner) - 5, limit)
    error = as_owner.error("memoryUpsert", 429, subject="Coffee", summary="x" * 100)
    assert error["code"] == "limit_reached"
    assert list(
        McpMemory.objects.filter(user_id=owner.stable_user_id).values_list("subject", flat=True)
    ) == ["Tea"]
