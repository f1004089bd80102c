"""Typed calls into the UserMeter actor (one queue round trip each, or inline)."""

from __future__ import annotations

from typing import Any

from apps.entitlements.actor import UserMeter


def _call(uid: str, method: str, timeout: float | None = None, **kwargs: Any) -> Any:
    return UserMeter.call(uid, method, timeout=timeout, **kwargs)


def consume(uid: str, resource: str, day: str, amount: int, limit: int) -> dict[str, Any]:
    return _call(uid, "consume", resource=resource, day=day, limit=limit, amount=amount)


def refund(uid: str, resource: str, day: str, amount: int) -> dict[str, Any]:
    return _call(uid, "refund", resource=resource, day=day, amount=amount)


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
