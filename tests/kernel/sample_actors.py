"""Actors that exist only for kernel tests. A subprocess worker loads them with --include."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from celery import shared_task
from django.db import connection, transaction
from django.utils import timezone

from apps.entitlements.actor.models import DailyCounter
from kody import outbox
from kody.actors import Actor, Planned, deletion_safe, one_statement, reads
from kody.errors import KodyError


class ProbeFailed(KodyError):
    code = "probe_failed"
    status = 409


class ProbePanic(BaseException):
    """Not an Exception: what a method raising SystemExit or its own BaseException looks like."""


# A fixed day for the chaos counters: nothing about them depends on the calendar.
CHAOS_DAY = date(2000, 1, 1)


# What the outbox probe task has run, and how many more times it should fail first.
outbox_runs: list[str] = []
outbox_failures: dict[str, int] = {}


@shared_task(name="tests.outbox_probe", ignore_result=True)
def outbox_probe(tag: str) -> None:
    if outbox_failures.get(tag, 0) > 0:
        outbox_failures[tag] -= 1
        raise RuntimeError(f"outbox probe {tag} told to fail")
    outbox_runs.append(tag)


# What Probe.note saw run (a method's effect outside the database).
notes: list[str] = []

# The psycopg connection of the last worker call (in-process workers only).
seen_connections: list[Any] = []


# The day of Probe.tally's counter row (fixed: nothing about it depends on the calendar). Far
# ahead of any day a test charges: the meter's charge prunes the user's counter rows older
# than its own day's retention, and a tally batched with charges must not lose its row.
TALLY_DAY = date(2999, 12, 31)
_TALLY = (
    "UPDATE daily_counters SET count = count + 1, revision = revision + 1"
    " WHERE resource = 'execute_calls_per_day' AND day = %(day)s RETURNING count"
)


def _plan_tally(label: str) -> Planned:
    # A value of several kinds (a number, text, a nested object) must come back as it was.
    select = (
        "SELECT json_build_object('count', count, 'label', %(label)s::text,"
        " 'doc', jsonb_build_object('k', count), 'twice', count)::text AS value FROM tallied"
    )
    return Planned(f"tallied AS ({_TALLY})", select, {"day": TALLY_DAY, "label": label})


class Probe(Actor):
    name = "tests.Probe"

    @one_statement(_plan_tally)
    def tally(self, label: str) -> dict[str, Any]:
        """A one-statement bump of its own counter row; the day's first call creates the
        row, which the statement cannot, and then runs the same statement."""
        DailyCounter.objects.get_or_create(
            resource="execute_calls_per_day", day=TALLY_DAY, defaults={"count": 0}
        )
        with connection.cursor() as cursor:
            cursor.execute(*_plan_tally(label))
            value: dict[str, Any] = json.loads(cursor.fetchone()[0])
        return value

    def whoami(self) -> dict[str, str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('search_path')")
            return {
                "user": self.user_id,
                "schema": self.schema,
                "search_path": cursor.fetchone()[0],
            }

    def rows_touched(self) -> dict[str, Any]:
        """The rowcount of this call's first statement, and the search path it ran under."""
        with connection.cursor() as cursor:
            cursor.execute("UPDATE daily_counters SET revision = revision")
            touched = cursor.rowcount
            cursor.execute("SELECT current_setting('search_path')")
            return {"touched": touched, "search_path": cursor.fetchone()[0]}

    def many_first(self) -> dict[str, Any]:
        """An ``executemany`` as the call's first statement, then where it ran."""
        with connection.cursor() as cursor:
            cursor.executemany(
                "UPDATE daily_counters SET revision = revision WHERE resource = %s",
                [["execute_calls_per_day"], ["nothing"]],
            )
        return self.whoami()

    def note(self, tag: str) -> str:
        """Sends nothing; runs Python only (``notes``): how often a method body ran."""
        notes.append(tag)
        return tag

    def swallow_broken(self) -> int:
        """Writes, then swallows an error out of an inner ``atomic(savepoint=False)``: the
        transaction is marked for rollback (``needs_rollback``) and cannot commit."""
        count = self._bump("execute_calls_per_day")
        try:
            with transaction.atomic(savepoint=False):
                raise ProbeFailed("inside")
        except ProbeFailed:
            pass
        return count

    def bound_first(self, value: str) -> list[str]:
        """A first statement with a parameter and a literal ``%%`` (in a batch, the user's
        search path goes out in front of it), and what it read back."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s, '100%%', current_setting('search_path')", [value])
            return list(cursor.fetchone())

    def arg_types(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The type of every argument as the method received it."""
        return {
            "args": [type(value).__name__ for value in args],
            "kwargs": {name: type(value).__name__ for name, value in kwargs.items()},
        }

    def fail(self, message: str) -> None:
        self._bump("execute_calls_per_day")
        raise ProbeFailed(message, details={"why": message})

    def bump(self) -> int:
        return self._bump("execute_calls_per_day")

    def slow_echo(self, value: str, seconds: float) -> dict[str, str]:
        import time

        time.sleep(seconds)
        return {"value": value, "user": self.user_id}

    def sleep_in_sql(self, seconds: float) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [seconds])
        return self._bump("execute_calls_per_day")

    def emit(self, tag: str, then_fail: bool = False) -> int:
        outbox.enqueue("tests.outbox_probe", {"tag": tag}, key=f"probe:{self.user_id}:{tag}")
        count = self._bump("execute_calls_per_day")
        if then_fail:
            raise ProbeFailed("after enqueueing")
        return count

    def panic(self) -> None:
        self._bump("execute_calls_per_day")
        raise ProbePanic("a BaseException out of a method")

    def remember_connection(self) -> None:
        seen_connections.append(connection.connection)
        self.fail("after remembering")

    def die_before_commit(self, marker: str) -> int:
        count = self._bump("job_runs_per_day")
        if not Path(marker).exists():
            Path(marker).write_text("died")
            os.kill(os.getpid(), signal.SIGKILL)
        return count

    def die_after_commit(self, marker: str) -> int:
        count = self._bump("job_runs_per_day")
        if not Path(marker).exists():
            Path(marker).write_text("died")
            transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
        return count

    def step(self, n: int, pause: float = 0.0) -> int:
        """The n-th call of a sequence: counts every application (``revision``), remembers the
        last step (``count``) and notes a step that did not follow the one before it."""
        key = ["chaos_last", CHAOS_DAY]
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO daily_counters (resource, day, count, revision)"
                " VALUES (%s, %s, 0, 0) ON CONFLICT DO NOTHING",
                key,
            )
            cursor.execute("SELECT count FROM daily_counters WHERE resource = %s AND day = %s", key)
            previous = cursor.fetchone()[0]
            cursor.execute(
                "UPDATE daily_counters SET count = %s, revision = revision + 1"
                " WHERE resource = %s AND day = %s",
                [n, *key],
            )
            if previous != n - 1:
                cursor.execute(
                    "INSERT INTO daily_counters (resource, day, count, revision)"
                    " VALUES ('chaos_out_of_order', %s, 1, 1) ON CONFLICT (resource, day)"
                    " DO UPDATE SET count = daily_counters.count + 1",
                    [CHAOS_DAY],
                )
        time.sleep(pause)
        return n

    def chaos_state(self) -> dict[str, int]:
        rows = {
            row.resource: row
            for row in DailyCounter.objects.filter(
                day=CHAOS_DAY, resource__in=["chaos_last", "chaos_out_of_order"]
            )
        }
        last = rows.get("chaos_last")
        disorder = rows.get("chaos_out_of_order")
        return {
            "last": last.count if last else 0,
            "applied": last.revision if last else 0,
            "out_of_order": disorder.count if disorder else 0,
        }

    def wake_in(self, seconds: float) -> None:
        self.set_alarm(timezone.now() + timedelta(seconds=seconds))

    def wake_at(self, at: str) -> None:
        self.set_alarm(datetime.fromisoformat(at))

    def alarm(self) -> None:
        self._bump("email_sends_per_day")

    @reads
    def peek(self) -> dict[str, Any]:
        """Today's count and the transaction a read runs in."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT (SELECT coalesce(sum(count), 0) FROM daily_counters WHERE day = %s),"
                " current_setting('search_path'), current_setting('transaction_read_only'),"
                " current_setting('transaction_isolation'), pg_current_xact_id_if_assigned()",
                [timezone.now().date()],
            )
            count, path, read_only, isolation, xid = cursor.fetchone()
        return {
            "user": self.user_id,
            "count": int(count),
            "search_path": path,
            "read_only": read_only,
            "isolation": isolation,
            "xid": None if xid is None else str(xid),
        }

    @reads
    @deletion_safe
    def peek_safe(self) -> int:
        return self.peek()["count"]

    @reads
    def peek_then_write(self) -> int:
        """A read that writes (a bug): its write must fail."""
        return self._bump("execute_calls_per_day")

    def bump_around_a_read(self, other: str, read_first: bool = False) -> dict[str, int]:
        """A write that reads another user (a nested read inside the batch) before its first
        statement or between two: every bump must land in this user's schema."""
        seen = Probe.call(other, "peek")["count"] if read_first else None
        first = self._bump("execute_calls_per_day")
        if seen is None:
            seen = Probe.call(other, "peek")["count"]
        return {"first": first, "other": seen, "second": self._bump("execute_calls_per_day")}

    @reads
    def peek_and_tidy(self) -> int:
        """A read that finds housekeeping to do: a bump, asked of the writer."""
        self.follow_up("bump")
        return self.peek()["count"]

    def _bump(self, resource: str) -> int:
        today = timezone.now().date()
        DailyCounter.objects.get_or_create(resource=resource, day=today, defaults={"count": 0})
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE daily_counters SET count = count + 1, revision = revision + 1"
                " WHERE resource = %s AND day = %s RETURNING count",
                [resource, today],
            )
            return cursor.fetchone()[0]
