"""Storage reconciliation: walk users by stable id and set each meter's payload bytes.

The walk is a keyset scan over ``users.stable_user_id`` whose position lives in the
platform-owned ``d1_storage_reconcile_cursor`` singleton. A run first *claims* its slice by
moving the cursor with a conditional UPDATE (only if nobody moved it meanwhile), so two
overlapping runs never reconcile the same slice twice; a crash mid-slice just leaves those
users for the next rotation. After the last user the cursor wraps to the start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apps.accounts.models import User
from apps.entitlements.models import D1StorageReconcileCursor
from apps.entitlements.services import metering
from apps.entitlements.services.storage import payload_bytes
from kody.userschema.models import UserSchema


@dataclass(frozen=True)
class ReconcilePass:
    users: int
    changed: int
    wrapped: bool


def _claim(batch: int) -> tuple[list[str], bool] | None:
    cursor, _ = D1StorageReconcileCursor.objects.get_or_create(singleton=1)
    ids = list(
        User.objects.filter(stable_user_id__gt=cursor.position, deleting_at__isnull=True)
        .order_by("stable_user_id")
        .values_list("stable_user_id", flat=True)[:batch]
    )
    wrapped = len(ids) < batch
    moved = D1StorageReconcileCursor.objects.filter(singleton=1, position=cursor.position).update(
        position="" if wrapped else ids[-1]
    )
    return (ids, wrapped) if moved else None


def reconcile_user(stable_user_id: str) -> bool:
    """Set one user's meter to their payload bytes; True when the stored value changed."""
    has_meter = UserSchema.objects.filter(user_id=stable_user_id).exists()
    if not has_meter and payload_bytes(stable_user_id) == 0:
        return False  # nothing stored and no meter yet: do not create a schema for zero
    result = metering.reconcile_storage_bytes(stable_user_id)
    return bool(result["bytes"] != result["previous"])


def reconcile_next(batch: int, *, out_of_time: Callable[[], bool] = lambda: False) -> ReconcilePass:
    claimed = _claim(batch)
    if claimed is None:
        return ReconcilePass(0, 0, wrapped=False)
    ids, wrapped = claimed
    done = changed = 0
    for stable_user_id in ids:
        if out_of_time():
            break
        changed += reconcile_user(stable_user_id)
        done += 1
    return ReconcilePass(done, changed, wrapped)
