"""Hibernation (issue 16): an idle user's schema is packed into one archive row and dropped;
the next call restores it transparently, before the method runs."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.utils import timezone

from apps.entitlements.actor import UserMeter
from apps.jobs.actor import StorageRunner
from apps.mailbox.actor import Mailbox
from kody.userschema import hibernation, schema_version
from kody.userschema.models import SchemaArchive, UserSchema
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import (
    create_schema,
    finish_deletion,
    introspect,
    known,
    mark_deleting,
)
from tests.clock import today_iso
from tests.kernel.catalog import relation_names
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


def _consume(user: str) -> dict:
    return UserMeter.call(
        user, "consume", resource="execute_calls_per_day", day=today_iso(), limit=1000
    )


def _read(user: str) -> dict:
    return UserMeter.call(user, "read", resource="execute_calls_per_day", day=today_iso())


def _schema_exists(user: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema_name_for(user)])
        return cursor.fetchone() is not None


def _idle(user: str, days: int = 40) -> None:
    """Make the user look idle for ``days`` (their last active day moved back)."""
    then = timezone.now().date() - timedelta(days=days)
    UserSchema.objects.filter(user_id=user).update(
        active_on=then, created_at=timezone.now() - timedelta(days=days)
    )


def _hibernate(*users: str) -> str:
    for user in users:
        _idle(user)
    out = io.StringIO()
    call_command("hibernate_schemas", "--idle-days", "30", stdout=out)
    return out.getvalue()


def _asleep(user: str) -> bool:
    row = UserSchema.objects.get(user_id=user)
    archived = SchemaArchive.objects.filter(user_id=user).exists()
    # Exactly one of schema and archive is authoritative, whatever happened.
    assert archived != _schema_exists(user)
    assert archived == (row.hibernated_at is not None)
    return archived


def test_hibernate_then_call_gives_the_same_answers(owner_id, outsider_id, inline_actors):
    for _ in range(3):
        _consume(owner_id)
    StorageRunner.call(owner_id, "export_storage")
    _consume(outsider_id)
    before = _read(owner_id)
    printed = _hibernate(owner_id)
    assert f"{schema_name_for(owner_id)}]" in printed and "Hibernated 1 schema(s)" in printed
    assert _asleep(owner_id)
    # The outsider was active: untouched, and their calls never notice.
    assert not _asleep(outsider_id)
    assert _consume(outsider_id)["count"] == 2
    # The next call restores first: same answer, and the counter goes on from where it was.
    assert _read(owner_id) == before
    assert not _asleep(owner_id)
    assert _consume(owner_id)["count"] == 4
    # The StorageRunner's tables held nothing: not rebuilt on wake; its next call makes them.
    assert UserSchema.objects.get(user_id=owner_id).table_sets == []
    assert StorageRunner.call(owner_id, "export_storage")["entries"] == []
    assert UserSchema.objects.get(user_id=owner_id).table_sets == [StorageRunner.name]


def test_a_table_set_holding_rows_comes_back_with_them(owner_id, inline_actors):
    StorageRunner.call(owner_id, "set_value", "job:kept", "greeting", "hello")
    Mailbox.call(owner_id, "count")  # a set created, then left empty
    before = StorageRunner.call(owner_id, "export_storage")["entries"]
    _hibernate(owner_id)
    assert _asleep(owner_id)
    _consume(owner_id)  # wakes it
    assert UserSchema.objects.get(user_id=owner_id).table_sets == [StorageRunner.name]
    assert StorageRunner.call(owner_id, "export_storage")["entries"] == before
    assert Mailbox.call(owner_id, "count")["messages"] == 0
    assert sorted(UserSchema.objects.get(user_id=owner_id).table_sets) == sorted(
        [StorageRunner.name, Mailbox.name]
    )


def test_an_active_user_is_not_hibernated_and_dry_run_changes_nothing(owner_id, inline_actors):
    _consume(owner_id)
    out = io.StringIO()
    call_command("hibernate_schemas", "--idle-days", "30", stdout=out)
    assert "No user schema has been idle" in out.getvalue()
    _idle(owner_id)
    call_command("hibernate_schemas", "--dry-run", stdout=out)
    assert "would hibernate" in out.getvalue()
    assert not _asleep(owner_id)


def test_a_call_stamps_the_user_active_once_a_day(owner_id, inline_actors):
    _consume(owner_id)
    assert UserSchema.objects.get(user_id=owner_id).active_on == timezone.now().date()


def test_identity_sequences_continue_after_a_restore(owner_id, inline_actors):
    # actor_calls rows and counters are keyed by text; the meter's inbound claims use ids.
    for _ in range(2):
        _consume(owner_id)
    _hibernate(owner_id)
    for _ in range(2):
        _consume(owner_id)  # an insert after restore must not collide with restored ids
    assert _read(owner_id)["count"] == 4


def test_a_call_queued_behind_hibernation_waits_and_restores(owner_id, inline_actors):
    _consume(owner_id)
    _idle(owner_id)
    started = threading.Event()
    results: dict[str, object] = {}

    def slow() -> None:
        try:
            started.set()
            results["slow"] = Probe.call(owner_id, "slow_echo", value="x", seconds=1.0)
        finally:
            connections.close_all()

    def queued() -> None:
        try:
            results["queued"] = _consume(owner_id)["count"]
        except BaseException as exc:  # surfaced below
            results["queued"] = exc
        finally:
            connections.close_all()

    runner = threading.Thread(target=slow)
    runner.start()
    started.wait()
    sleeper = threading.Thread(target=lambda: results.update(packed=_hibernate_once(owner_id)))
    sleeper.start()
    caller = threading.Thread(target=queued)
    caller.start()
    for thread in (runner, sleeper, caller):
        thread.join(30)
    assert results["slow"] == {"value": "x", "user": owner_id}
    assert results["queued"] == 2  # whichever ran first, the call saw a whole schema
    assert _read(owner_id)["count"] == 2


def _hibernate_once(user: str) -> object:
    try:
        return hibernation.hibernate_schema(user, timezone.now().date() - timedelta(days=30))
    finally:
        connections.close_all()


def test_two_callers_waking_the_same_user_both_succeed(owner_id, inline_actors):
    _consume(owner_id)
    _hibernate(owner_id)
    counts: list[int] = []

    def call() -> None:
        try:
            counts.append(_consume(owner_id)["count"])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(counts) == [2, 3, 4, 5]
    assert not _asleep(owner_id)


def test_a_crash_mid_hibernation_keeps_the_schema(owner_id, inline_actors, monkeypatch):
    _consume(owner_id)

    def crash(user_id: str) -> None:
        raise RuntimeError("killed mid-hibernation")

    monkeypatch.setattr(hibernation, "_before_drop", crash)
    with pytest.raises(RuntimeError):
        _hibernate(owner_id)
    assert not _asleep(owner_id)
    assert _consume(owner_id)["count"] == 2


def test_a_crash_mid_restore_keeps_the_archive(owner_id, inline_actors, monkeypatch):
    _consume(owner_id)
    _hibernate(owner_id)
    loaded: list[str] = []

    def crash(user_id: str, table: str) -> None:
        loaded.append(table)
        if len(loaded) == 2:
            raise RuntimeError("killed mid-restore")

    monkeypatch.setattr(hibernation, "_after_load", crash)
    with pytest.raises(RuntimeError):
        hibernation.restore_schema(owner_id)
    assert _asleep(owner_id)
    monkeypatch.undo()
    known.forget(owner_id)
    assert _consume(owner_id)["count"] == 2


def test_an_old_schema_is_upgraded_on_restore(owner_id, inline_actors):
    schema = create_schema(owner_id, version=1, table_sets=None)
    known.forget(owner_id)
    _hibernate(owner_id)
    out = io.StringIO()
    call_command("upgrade_user_schemas", stdout=out)
    assert "1 hibernated schema(s) upgrade on restore" in out.getvalue()
    assert _consume(owner_id)["count"] == 1
    row = UserSchema.objects.get(user_id=owner_id)
    assert row.version == schema_version()
    assert "revision" in introspect(connection.cursor(), schema).columns["daily_counters"]


def test_deleting_a_hibernated_user_deletes_the_archive(owner_id, outsider_id, inline_actors):
    _consume(owner_id)
    _consume(outsider_id)
    _hibernate(owner_id, outsider_id)
    mark_deleting(owner_id)
    finish_deletion(owner_id)
    assert not SchemaArchive.objects.filter(user_id=owner_id).exists()
    assert not UserSchema.objects.filter(user_id=owner_id).exists()
    assert not _schema_exists(owner_id)
    assert _asleep(outsider_id)  # the other user's archive stays


def test_the_hibernation_lane_packs_idle_users(owner_id, outsider_id, inline_actors):
    _consume(owner_id)
    _consume(outsider_id)
    _idle(owner_id)
    call_command("run_lane", "schema_hibernation", stdout=io.StringIO())
    assert _asleep(owner_id)
    assert not _asleep(outsider_id)


def test_bad_idle_days_is_refused(owner_id):
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        call_command("hibernate_schemas", "--idle-days", "0", stdout=io.StringIO())


def test_stamping_activity_never_waits_behind_a_locked_registry_row(owner_id, inline_actors):
    _consume(owner_id)
    UserSchema.objects.filter(user_id=owner_id).update(active_on=None)
    known.forget(owner_id)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:  # another session holds the user's registry row, as set_alarm does
        from django.db import transaction

        try:
            with transaction.atomic():
                list(UserSchema.objects.select_for_update().filter(user_id=owner_id))
                holding.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    try:
        assert _consume(owner_id)["count"] == 2  # ran without waiting for the row
        assert known.entry(owner_id)[2] == -1  # not stamped: the next call tries again
    finally:
        release.set()
        holder.join(10)
    _consume(owner_id)
    assert UserSchema.objects.get(user_id=owner_id).active_on == timezone.now().date()


def test_a_v5_archive_restores_without_the_unread_indexes(owner_id, inline_actors):
    from kody.userschema.upgrades import UNREAD_INDEXES

    schema = create_schema(owner_id, version=5, table_sets=None)
    known.forget(owner_id)
    with connection.cursor() as cursor:  # as versions 1-5 built it
        cursor.execute(
            f'CREATE INDEX "actor_calls_id_3e9d8c1f_like" ON "{schema}".actor_calls'
            ' ("id" varchar_pattern_ops)'
        )
    _hibernate(owner_id)
    assert SchemaArchive.objects.get(user_id=owner_id).version == 5
    assert _consume(owner_id)["count"] == 1
    assert UserSchema.objects.get(user_id=owner_id).version == schema_version()
    names = relation_names(schema, "i")
    assert "daily_counters_day_ix" in names and not names & set(UNREAD_INDEXES)


@pytest.fixture
def spare_pool(settings):
    from kody.userschema import spares

    settings.KODY_SPARE_SCHEMAS = 1
    spares.drop_all()
    yield spares
    spares.drop_all()


def test_a_restore_renames_a_spare_schema(owner_id, inline_actors, spare_pool):
    _consume(owner_id)
    StorageRunner.call(owner_id, "set_value", "job:one", "k", {"v": 1})  # beyond the spare
    before = StorageRunner.call(owner_id, "get_value", "job:one", "k")
    assert before["found"]
    _hibernate(owner_id)  # the command tops the pool up
    assert spare_pool.count() == 1
    assert _consume(owner_id)["count"] == 2
    assert spare_pool.count() == 0  # renamed into the user's schema
    assert not _asleep(owner_id)
    assert StorageRunner.call(owner_id, "get_value", "job:one", "k") == before
    assert _consume(owner_id)["count"] == 3


def test_a_crash_mid_restore_puts_the_spare_back(owner_id, inline_actors, spare_pool, monkeypatch):
    _consume(owner_id)
    _hibernate(owner_id)
    assert spare_pool.count() == 1

    def crash(user_id: str, table: str) -> None:
        raise RuntimeError("killed mid-restore")

    monkeypatch.setattr(hibernation, "_after_load", crash)
    with pytest.raises(RuntimeError):
        hibernation.restore_schema(owner_id)
    assert _asleep(owner_id) and spare_pool.count() == 1
    monkeypatch.undo()
    known.forget(owner_id)
    assert _consume(owner_id)["count"] == 2
    assert spare_pool.count() == 0


def test_a_spare_of_another_version_is_never_taken_and_is_dropped(
    owner_id, inline_actors, spare_pool
):
    with connection.cursor() as cursor:
        cursor.execute('CREATE SCHEMA "kspare_v1000000_0"')
    spare_pool.top_up(0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'kspare_v1000000_0'")
        assert cursor.fetchone() is None


def test_without_a_spare_a_restore_builds_from_the_ddl(
    owner_id, inline_actors, spare_pool, settings
):
    settings.KODY_SPARE_SCHEMAS = 0
    _consume(owner_id)
    _hibernate(owner_id)
    assert spare_pool.count() == 0
    assert _consume(owner_id)["count"] == 2
    assert not _asleep(owner_id)


def test_a_v6_archive_restores_without_the_tables_version_7_retired(owner_id, inline_actors):
    import json
    import zlib

    from kody.userschema.upgrades import is_retired

    _consume(owner_id)
    _hibernate(owner_id)
    archive = SchemaArchive.objects.get(user_id=owner_id)
    document = json.loads(zlib.decompress(bytes(archive.data)))
    # As version 6 packed it: the two UserMeter tables nothing reads any more, with rows.
    document["version"] = 6
    document["tables"]["dynamic_worker_days"] = {
        "columns": ["day", "worker_id", "created_at"],
        "rows": 1,
        "copy": f"{today_iso()}\tw1\t{today_iso()} 10:00:00+00\n",
    }
    document["tables"]["inbound_mcp_connection_last_used"] = {
        "columns": ["client_id", "last_used_at"],
        "rows": 1,
        "copy": f"claude\t{today_iso()} 10:00:00+00\n",
    }
    archive.version = 6
    archive.data = zlib.compress(json.dumps(document).encode())
    archive.save()
    assert is_retired("dynamic_worker_days", 6) and not is_retired("dynamic_worker_days", 7)
    assert not is_retired("daily_counters", 6)

    assert _consume(owner_id)["count"] == 2  # restored, the old count kept
    assert UserSchema.objects.get(user_id=owner_id).version == schema_version()
    tables = relation_names(schema_name_for(owner_id), "r")
    assert "daily_counters" in tables
    assert not tables & {"dynamic_worker_days", "inbound_mcp_connection_last_used"}
