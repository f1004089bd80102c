"""Typed calls into the UserMeter actor (one queue round trip each, or inline).

Every UserMeter call outside the entitlements app goes through here (or through
``apps.entitlements.services``); the reply shapes are ``apps.entitlements.actor.replies``.
"""

from __future__ import annotations

from typing import Any

from apps.entitlements.actor import UserMeter
from apps.entitlements.actor.replies import (
    CounterRow,
    DeletionMark,
    DeletionState,
    InboundCharge,
    LeaseRepairFinalized,
    LeaseRepairPrepared,
    NeedsBootstrap,
    Reading,
    Refund,
    Snapshot,
    StorageBytes,
    StorageReconcile,
    StorageReservation,
    WriteLease,
    WriteLeaseAcquired,
    WriteLeaseReleased,
)
from kody.actors import CallContext


def _call(
    uid: str, method: str, timeout: float | None = None, key: str | None = None, **kwargs: Any
) -> Any:
    return UserMeter.call(uid, method, timeout=timeout, idempotency_key=key, **kwargs)


def _charge_key(method: str, resource: str, day: str, key: str | None) -> str | None:
    # The caller's key names one charge; the method, resource and day keep a key reused for
    # another resource (or a refund of the same work) from answering with this one's record.
    return None if key is None else f"{method}:{resource}:{day}:{key}"


def consume(
    uid: str, resource: str, day: str, amount: int, limit: int, key: str | None = None
) -> Reading | NeedsBootstrap:
    return _call(
        uid,
        "consume",
        key=_charge_key("consume", resource, day, key),
        resource=resource,
        day=day,
        limit=limit,
        amount=amount,
    )


def refund(uid: str, resource: str, day: str, amount: int, key: str | None = None) -> Refund:
    return _call(
        uid,
        "refund",
        key=_charge_key("refund", resource, day, key),
        resource=resource,
        day=day,
        amount=amount,
    )


def read_daily(uid: str, day: str) -> dict[str, int]:
    return _call(uid, "read_day", day=day)


def consume_inbound_delivery(
    uid: str, delivery_id: str, resource: str, day: str, amount: int, limit: int
) -> InboundCharge:
    return _call(
        uid,
        "consume_inbound_delivery",
        delivery_id=delivery_id,
        resource=resource,
        day=day,
        limit=limit,
        amount=amount,
    )


def read_storage_bytes(uid: str) -> StorageBytes:
    return _call(uid, "read_storage_bytes")


def reserve_storage_bytes(uid: str, amount: int, limit: int) -> StorageReservation:
    result = _call(uid, "reserve_storage_bytes", amount=amount, limit=limit)
    if result.get("needs_bootstrap"):
        _call(uid, "initialize_storage_bytes")
        result = _call(uid, "reserve_storage_bytes", amount=amount, limit=limit)
    return result


def count_package_services(uid: str, *, status: str = "running", mode: str | None = None) -> int:
    return int(_call(uid, "count_package_service_states", status=status, mode=mode))


def snapshot(
    uid: str, day: str, timeout: float | None = None, counts: list[str] | None = None
) -> Snapshot:
    """The meter's reads for the usage summary; ``counts``: registered schema counts to
    take in the same call (``counters.register_counter(..., schema_count=...)``)."""
    if counts:
        return _call(uid, "snapshot", timeout=timeout, day=day, counts=counts)
    return _call(uid, "snapshot", timeout=timeout, day=day)


def consume_inbound_delivery_in_call(
    context: CallContext, delivery_id: str, resource: str, day: str, limit: int
) -> InboundCharge:
    """The same charge as :func:`consume_inbound_delivery`, from inside another actor's call
    for the same user: it runs in that call's transaction, under the lock it already holds
    (one commit for the delivery and its charge), not through the queue."""
    return UserMeter(context).consume_inbound_delivery(
        delivery_id=delivery_id, resource=resource, day=day, limit=limit
    )


def consume_in_call(
    context: CallContext, resource: str, day: str, amount: int, limit: int
) -> Reading | NeedsBootstrap:
    """The same charge as :func:`consume`, from inside another actor's call for the same user
    (its transaction, under the lock it holds). No key: the charge commits or rolls back with
    the caller's own writes, so it happens once exactly when they do."""
    return UserMeter(context).consume(resource=resource, day=day, limit=limit, amount=amount)


def reserve_storage_bytes_in_call(
    context: CallContext, amount: int, limit: int
) -> StorageReservation:
    """Reserve (a negative ``amount``: release) stored bytes from inside another actor's call
    for the same user: in that call's transaction, so the bytes commit or roll back with the
    rows that weigh them. ``limit`` is the plan's; bucket estimates are taken off it here."""
    meter = UserMeter(context)
    result = meter.reserve_storage_bytes_with_buckets(amount=amount, limit=limit)
    if result.get("needs_bootstrap"):
        meter.initialize_storage_bytes()
        result = meter.reserve_storage_bytes_with_buckets(amount=amount, limit=limit)
    return result


def read_storage_bytes_in_call(context: CallContext) -> StorageBytes:
    return UserMeter(context).read_storage_bytes()


def reconcile_storage_bytes(uid: str) -> StorageReconcile:
    return _call(uid, "reconcile_storage_bytes")


def daily_history(uid: str) -> list[CounterRow]:
    return _call(uid, "daily_history")


# --- the deletion fence and write leases (apps.accounts.deletion) -----------------------------


def mark_deleting(uid: str, at: str) -> DeletionMark:
    return _call(uid, "mark_deleting", at=at)


def unmark_deleting(uid: str) -> DeletionMark:
    return _call(uid, "unmark_deleting")


def read_deletion_state(uid: str) -> DeletionState:
    return _call(uid, "read_deletion_state")


def acquire_write_lease(uid: str, token: str, holder: str, at: str) -> WriteLeaseAcquired:
    """Take a lease for one guarded mutation, or raise ``AccountDeleting`` once the meter's
    tombstone is set (``apps.accounts.policy.write_guard``)."""
    return _call(uid, "acquire_write_lease", token=token, holder=holder, at=at)


def release_write_lease(uid: str, token: str) -> WriteLeaseReleased:
    """``released`` is False when the lease was gone: an operator repaired it meanwhile."""
    return _call(uid, "release_write_lease", token=token)


def list_write_leases(uid: str) -> list[WriteLease]:
    return _call(uid, "list_write_leases")


def prepare_lease_repair(uid: str, token: str, repair_id: str) -> LeaseRepairPrepared:
    return _call(uid, "prepare_lease_repair", token=token, repair_id=repair_id)


def finalize_lease_repair(uid: str, token: str, repair_id: str) -> LeaseRepairFinalized:
    return _call(uid, "finalize_lease_repair", token=token, repair_id=repair_id)
