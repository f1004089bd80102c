"""The UserMeter's daily counters: the charge, refunds, reads and inbound-delivery claims.

A check-and-increment is one conditional UPDATE under the owner lock, so no race of callers
can overshoot a limit. The charge is one SQL text (``_plan_charge``): the prune of rows past the
window, the increment when it fits, and the row as it stands when it does not, answered as
the method's JSON value. A batch of charges goes out on the kernel's one-statement path
(``kody.actors.one_statement``); the method runs the very same statement, and only a day's
first charge — no row yet, so no answer — runs the method, which inserts the zero row
(concurrent bootstraps are harmless) and charges again.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.db import connection

from apps.entitlements.actor.common import (
    CLAIMS,
    COUNTERS,
    PRUNE,
    RESOURCES,
    MeterPart,
    cutoff_of,
    day_of,
    positive,
    resource_named,
)
from apps.entitlements.actor.replies import InboundCharge, NeedsBootstrap, Reading, Refund
from kody.actors import Planned, one_statement, reads

_CHARGE_CTES = f"""{PRUNE},
    charged AS (
        UPDATE {COUNTERS} SET count = count + %(amount)s, revision = revision + 1,
               updated_at = now()
         WHERE resource = %(resource)s AND day = %(day)s AND count + %(amount)s <= %(limit)s
        RETURNING count, revision)"""
# Every part reads the same snapshot, so the second branch sees the row the charge did not
# change. No row at all (the day's first call) answers nothing.
_CHARGE_SELECT = f"""SELECT json_build_object(
    'resource', %(resource)s::text, 'day', %(day)s::date, 'allowed', allowed,
    'count', count, 'limit', %(limit)s::bigint,
    'remaining', GREATEST(%(limit)s::bigint - count, 0), 'revision', revision,
    'needs_bootstrap', false)::text AS value
  FROM (SELECT true AS allowed, count, revision FROM charged
        UNION ALL
        SELECT false, count, revision FROM {COUNTERS}
         WHERE resource = %(resource)s AND day = %(day)s
           AND NOT EXISTS (SELECT 1 FROM charged)) AS reading"""


def _plan_charge(
    resource: str, day: str, limit: int, amount: int = 1, bootstrap: bool = True
) -> Planned:
    when = day_of(day)
    params = {
        "resource": resource_named(resource),
        "day": when,
        "amount": positive(amount),
        "limit": int(limit),
        "cutoff": cutoff_of(when),
    }
    return Planned(_CHARGE_CTES, _CHARGE_SELECT, params)


def _reading(
    resource: str, day: date, allowed: bool, count: int, revision: int, limit: int
) -> Reading:
    return {
        "resource": resource,
        "day": day.isoformat(),
        "allowed": allowed,
        "count": count,
        "limit": limit,
        "remaining": max(limit - count, 0),
        "revision": revision,
        "needs_bootstrap": False,
    }


def _needs_bootstrap(resource: str, day: date) -> NeedsBootstrap:
    return {"resource": resource, "day": day.isoformat(), "needs_bootstrap": True}


class DailyCounters(MeterPart):
    def initialize(self, resource: str, day: str, count: int = 0) -> dict[str, Any]:
        """Cold bootstrap of one (resource, day): insert-if-absent, then record the version."""
        when = day_of(day)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {COUNTERS} (resource, day, count, revision, updated_at)"
                " VALUES (%s, %s, %s, 0, now()) ON CONFLICT DO NOTHING",
                [resource_named(resource), when, max(0, int(count))],
            )
            created = cursor.rowcount == 1
            self._prune(cursor, when)
            self._record_version(cursor)
        return {"resource": resource, "day": when.isoformat(), "created": created}

    @one_statement(_plan_charge)
    def consume(
        self, resource: str, day: str, limit: int, amount: int = 1, bootstrap: bool = True
    ) -> Reading | NeedsBootstrap:
        """Charge ``amount`` when it fits under ``limit`` (all or nothing).

        A day's first call finds no row: with ``bootstrap=False`` it answers
        ``needs_bootstrap`` (the caller then runs ``initialize``); by default the same
        insert-if-absent runs here, inside this call's transaction, and the charge runs again.
        """
        statement = _plan_charge(resource, day, limit, amount)
        with connection.cursor() as cursor:
            cursor.execute(*statement)
            row = cursor.fetchone()
            if row is None and bootstrap:
                self.initialize(resource, day)
                cursor.execute(*statement)
                row = cursor.fetchone()
        if row is None:
            return _needs_bootstrap(resource, day_of(day))
        reading: Reading = json.loads(row[0])
        return reading

    def refund(self, resource: str, day: str, amount: int = 1) -> Refund:
        when = day_of(day)
        with connection.cursor() as cursor:
            self._prune(cursor, when)
            cursor.execute(
                f"UPDATE {COUNTERS} SET count = GREATEST(count - %s, 0), revision = revision + 1,"
                " updated_at = now() WHERE resource = %s AND day = %s RETURNING count, revision",
                [positive(amount), resource_named(resource), when],
            )
            row = cursor.fetchone()
        count, revision = row if row else (0, 0)
        return {"resource": resource, "day": when.isoformat(), "count": count, "revision": revision}

    @reads
    def read(self, resource: str, day: str) -> dict[str, Any]:
        when = day_of(day)
        with connection.cursor() as cursor:
            self._prune_reading(cursor, when)
            cursor.execute(
                f"SELECT count, revision FROM {COUNTERS} WHERE resource = %s AND day = %s",
                [resource_named(resource), when],
            )
            row = cursor.fetchone()
        if row is None:
            return {**_needs_bootstrap(resource, when), "count": 0, "revision": 0}
        return {
            "resource": resource,
            "day": when.isoformat(),
            "count": row[0],
            "revision": row[1],
            "needs_bootstrap": False,
        }

    @reads
    def read_day(self, day: str) -> dict[str, int]:
        """Every daily resource's count for one UTC day (missing rows read as zero)."""
        when = day_of(day)
        with connection.cursor() as cursor:
            self._prune_reading(cursor, when)
            return {resource: 0 for resource in sorted(RESOURCES)} | self._counts(cursor, when)

    def consume_inbound_delivery(
        self,
        delivery_id: str,
        resource: str,
        day: str,
        limit: int,
        amount: int = 1,
        bootstrap: bool = True,
    ) -> InboundCharge:
        """Charge one inbound delivery once: a retry with the same id returns the first answer."""
        if not delivery_id:
            raise ValueError("delivery_id is required")
        when = day_of(day)
        with connection.cursor() as cursor:
            # A claim older than the retention window counts as gone (``consume`` below prunes
            # it): one statement instead of a prune before the lookup.
            cursor.execute(
                f"SELECT resource, day, count_after, revision FROM {CLAIMS}"
                " WHERE delivery_id = %s AND day >= %s",
                [delivery_id, cutoff_of(when)],
            )
            claimed = cursor.fetchone()
        if claimed is not None:
            reading = _reading(claimed[0], claimed[1], True, claimed[2], claimed[3], limit)
            return {**reading, "charged": False, "delivery_id": delivery_id}
        result = self.consume(resource, day, limit, amount, bootstrap=bootstrap)
        if result["needs_bootstrap"] or not result["allowed"]:
            return {**result, "charged": False, "delivery_id": delivery_id}
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {CLAIMS}"
                " (delivery_id, resource, day, count_after, revision, claimed_at)"
                " VALUES (%s, %s, %s, %s, %s, now())",
                [delivery_id, resource, when, result["count"], result["revision"]],
            )
        return {**result, "charged": True, "delivery_id": delivery_id}
