"""Typed calls into the UserMeter actor (one queue round trip each, or inline)."""

from __future__ import annotations

from typing import Any

from apps.entitlements.actor import UserMeter


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
) -> dict[str, Any]:
    return _call(
        uid,
        "consume",
        key=_charge_key("consume", resource, day, key),
        resource=resource,
        day=day,
        limit=limit,
        amount=amount,
    )


def refund(
    uid: str, resource: str, day: str, amount: int, key: str | None = None
) -> dict[str, Any]:
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
) -> dict[str, Any]:
    return _call(
        uid,
        "consume_inbound_delivery",
        delivery_id=delivery_id,
        resource=resource,
        day=day,
        limit=limit,
        amount=amount,
    )


def read_storage_bytes(uid: str) -> dict[str, Any]:
    return _call(uid, "read_storage_bytes")


def reserve_storage_bytes(uid: str, amount: int, limit: int) -> dict[str, Any]:
    result = _call(uid, "reserve_storage_bytes", amount=amount, limit=limit)
    if result.get("needs_bootstrap"):
        _call(uid, "initialize_storage_bytes")
        result = _call(uid, "reserve_storage_bytes", amount=amount, limit=limit)
    return result


def count_package_services(uid: str, *, status: str = "running", mode: str | None = None) -> int:
    return int(_call(uid, "count_package_service_states", status=status, mode=mode))


def snapshot(uid: str, day: str, timeout: float | None = None) -> dict[str, Any]:
    return _call(uid, "snapshot", timeout=timeout, day=day)
