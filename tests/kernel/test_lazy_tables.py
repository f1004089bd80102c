"""Tables only where used (issue 16): an actor's tables appear the first time it runs for a
user; upgrades and lookups understand "not created yet"."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from apps.jobs.actor import JobManager, RunLog, StorageRunner
from apps.mailbox.actor import Mailbox
from kody.userschema import tablesets
from kody.userschema.models import UserSchema
from kody.userschema.schemas import (
    create_schema,
    ensure_schema,
    has_actor_state,
    introspect,
    known,
    upgrade_schema,
)
from tests.clock import today_iso

pytestmark = pytest.mark.django_db(transaction=True)

MAIL = "email_messages"
RUNS = "runs"
STORAGE = "storage_entries"


def _tables(user_id: str) -> set[str]:
    schema = UserSchema.objects.get(user_id=user_id).schema_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r'",
            [schema],
        )
        return {row[0] for row in cursor.fetchall()}


def _sets(user_id: str) -> list[str] | None:
    return UserSchema.objects.get(user_id=user_id).table_sets


def _consume(user_id: str) -> dict:
    return UserMeter.call(
        user_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5
    )


def test_the_meter_alone_creates_no_mail_job_or_storage_tables(owner_id, inline_actors):
    assert _consume(owner_id)["count"] == 1
    tables = _tables(owner_id)
    assert {"daily_counters", "actor_owner", "actor_calls", "actor_alarms"} <= tables
    assert not tables & {MAIL, RUNS, STORAGE}
    assert _sets(owner_id) == []
    assert not has_actor_state(owner_id, Mailbox.name)
    assert has_actor_state(owner_id, UserMeter.name)  # the meter's tables are every user's


def test_the_first_mailbox_call_creates_the_mailbox_tables_for_that_user_only(
    owner_id, outsider_id, inline_actors
):
    _consume(owner_id)
    _consume(outsider_id)
    assert Mailbox.call(owner_id, "count")["messages"] == 0
    assert MAIL in _tables(owner_id)
    assert _sets(owner_id) == [Mailbox.name]
    assert has_actor_state(owner_id, Mailbox.name)
    # The outsider never ran the mailbox: nothing of it there, and nothing visible to them.
    assert MAIL not in _tables(outsider_id)
    assert not has_actor_state(outsider_id, Mailbox.name)


def test_a_first_call_creates_schema_and_set_in_one_go(owner_id, inline_actors):
    assert StorageRunner.call(owner_id, "export_storage")["entries"] == []
    tables = _tables(owner_id)
    assert STORAGE in tables and RUNS not in tables and MAIL not in tables
    assert _sets(owner_id) == [StorageRunner.name]


def test_actors_sharing_tables_both_see_them(owner_id, inline_actors):
    RunLog.call(owner_id, "export_runs")
    assert RUNS in _tables(owner_id)
    known.clear()  # another process: it finds the tables and records JobManager's set
    JobManager.call(owner_id, "export_state")
    assert _sets(owner_id) == sorted([RunLog.name, JobManager.name])


def test_a_set_is_closed_over_its_foreign_keys():
    for name, tables in tablesets.sets().items():
        assert tables, name
    assert {MAIL, "email_threads"} <= tablesets.sets()[Mailbox.name]
    assert not tablesets.eager_tables() & tablesets.sets()[Mailbox.name]


def test_an_upgrade_leaves_sets_not_created_yet_alone(owner_id):
    schema = create_schema(owner_id, version=1, table_sets=())
    known.forget(owner_id)
    plan = upgrade_schema(owner_id)
    assert plan.needed
    assert not any(MAIL in sql or "storage_entries" in sql for sql in plan.statements)
    assert MAIL not in _tables(owner_id)
    assert "revision" in introspect(connection.cursor(), schema).columns["daily_counters"]
    # A set created after the upgrade comes at the current version.
    ensure_schema(owner_id, actors=[Mailbox.name])
    assert MAIL in _tables(owner_id)


def test_with_lazy_tables_off_every_table_is_created(owner_id, inline_actors, settings):
    settings.KODY_LAZY_ACTOR_TABLES = False
    _consume(owner_id)
    assert {MAIL, RUNS, STORAGE} <= _tables(owner_id)
    assert _sets(owner_id) is None
    assert has_actor_state(owner_id, Mailbox.name)


def test_a_schema_made_before_lazy_tables_counts_as_holding_every_set(owner_id, inline_actors):
    create_schema(owner_id, table_sets=None)
    assert _sets(owner_id) is None
    assert has_actor_state(owner_id, Mailbox.name)
    assert Mailbox.call(owner_id, "count")["messages"] == 0
    assert _sets(owner_id) is None


def test_an_id_without_a_schema_has_no_actor_state(owner_id):
    assert not has_actor_state(owner_id, Mailbox.name)
    assert not UserSchema.objects.filter(user_id=owner_id).exists()
