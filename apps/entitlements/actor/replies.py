"""What UserMeter methods answer, as TypedDicts: the shapes other apps read through
``apps.entitlements.services`` (replies travel as JSON, so every value is a JSON type).

Methods nothing outside the meter reads yet (package service states) still answer
``dict[str, Any]``.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Reading(TypedDict):
    """A daily counter after a charge (``allowed``) or a refused one (unchanged)."""

    resource: str
    day: str
    allowed: bool
    count: int
    limit: int
    remaining: int
    revision: int
    needs_bootstrap: bool  # False


class NeedsBootstrap(TypedDict):
    """``consume(..., bootstrap=False)`` found no row for the day: call ``initialize``."""

    resource: str
    day: str
    needs_bootstrap: bool  # True


class InboundCharge(TypedDict):
    """``consume_inbound_delivery``: a :class:`Reading` (or, without a row, only ``resource``,
    ``day`` and ``needs_bootstrap``), whether this delivery was charged now, and its id."""

    resource: str
    day: str
    needs_bootstrap: bool
    charged: bool
    delivery_id: str
    allowed: NotRequired[bool]
    count: NotRequired[int]
    limit: NotRequired[int]
    remaining: NotRequired[int]
    revision: NotRequired[int]


class Refund(TypedDict):
    resource: str
    day: str
    count: int
    revision: int


class StorageBytes(TypedDict):
    bytes: int
    revision: int
    initialized: bool
    updated_at: str | None


class StorageReservation(TypedDict):
    needs_bootstrap: bool
    allowed: bool
    bytes: int
    revision: int
    limit: NotRequired[int]  # absent when ``needs_bootstrap``


class StorageReconcile(TypedDict):
    bytes: int
    previous: int
    revision: int


class ServiceCounts(TypedDict):
    running: int
    persistent_running: int


class Snapshot(TypedDict):
    day: str
    daily: dict[str, int]
    storage_bytes: int
    package_services: ServiceCounts
    counts: NotRequired[dict[str, int]]  # the schema counts asked for, by resource


class CounterRow(TypedDict):
    day: str
    resource: str
    count: int
    revision: int


class DeletionMark(TypedDict):
    marked: bool
    active_write_leases: NotRequired[int]  # only when marking


class DeletionState(TypedDict):
    deleting_at: str | None
    active_write_leases: int


class WriteLeaseAcquired(TypedDict):
    token: str
    held: bool


class WriteLeaseReleased(TypedDict):
    released: bool


class WriteLease(TypedDict):
    token: str
    holder: str
    acquired_at: str | None
    pending_repair_id: str | None


class LeaseRepairPrepared(TypedDict):
    prepared: bool
    reason: NotRequired[str]  # when not prepared: ``repair_pending`` or ``not_found``
    holder: NotRequired[str]
    acquired_at: NotRequired[str | None]


class LeaseRepairFinalized(TypedDict):
    finalized: bool


class Purged(TypedDict):
    deleted: dict[str, int]
    tombstone_kept: bool
