from __future__ import annotations

import secrets

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection, transaction
from django.db.utils import ProgrammingError
from django.utils import timezone

from apps.entitlements.actor import UserMeter
from apps.entitlements.actor.models import DailyCounter
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.errors import AccountDeleting
from kody.userschema import actor_models, schema_version
from kody.userschema.accounts import NoLiveAccount
from kody.userschema.ddl import compile_schema
from kody.userschema.models import UserSchema
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import (
    SchemaNameCollision,
    create_schema,
    ensure_schema,
    finish_deletion,
    introspect,
    known,
    mark_deleting,
    purge_schema,
    upgrade_schema,
)
from tests.clock import today_iso
from tests.kernel.catalog import relation_names

pytestmark = pytest.mark.django_db(transaction=True)


def _columns(schema: str) -> dict[str, set[str]]:
    with connection.cursor() as cursor:
        return introspect(cursor, schema).columns


def _schema_exists(schema: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
        return cursor.fetchone() is not None


def test_schema_name_is_deterministic_short_and_safe(owner_id):
    name = schema_name_for(owner_id)
    assert name == schema_name_for(owner_id)
    assert name.startswith("u_") and len(name.encode()) <= 63
    assert schema_name_for("not-a-hex-id").startswith("u_")
    with pytest.raises(ValueError):
        schema_name_for("")


def test_actor_models_stay_out_of_django_migrations_and_public():
    global_models = set(apps.get_models())
    assert not global_models & set(actor_models())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('public.daily_counters'), to_regclass('public.actor_owner')"
        )
        assert cursor.fetchone() == (None, None)


def test_creation_builds_every_actor_table_from_the_models(owner_id):
    schema = create_schema(owner_id, table_sets=None)  # None: every actor's set at once
    columns = _columns(schema)
    for model in actor_models():
        expected = {field.column for field in model._meta.local_concrete_fields}
        assert columns[model._meta.db_table] == expected
    row = UserSchema.objects.get(user_id=owner_id)
    assert (row.schema_name, row.version) == (schema, schema_version())
    assert create_schema(owner_id) == schema  # a second creation is a no-op


def test_no_actor_table_is_reachable_without_the_actor_layer(owner_id, inline_actors):
    UserMeter.call(owner_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5)
    with pytest.raises(ProgrammingError, match="daily_counters"), transaction.atomic():
        DailyCounter.objects.count()


def test_a_colliding_schema_name_is_refused(owner_id, outsider_id):
    UserSchema.objects.create(
        user_id=outsider_id, schema_name=schema_name_for(owner_id), version=schema_version()
    )
    with pytest.raises(SchemaNameCollision):
        create_schema(owner_id)


def test_a_schema_that_lost_its_registry_row_is_adopted_with_its_data(owner_id, inline_actors):
    UserMeter.call(owner_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5)
    UserSchema.objects.filter(user_id=owner_id).delete()  # e.g. a flushed or partly restored db
    known.clear()

    assert create_schema(owner_id) == schema_name_for(owner_id)
    row = UserSchema.objects.get(user_id=owner_id)
    assert row.version == schema_version()
    # The counter survived adoption: the next charge continues from it.
    result = UserMeter.call(
        owner_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5
    )
    assert result["count"] == 2


def test_an_orphan_schema_owned_by_someone_else_is_not_adopted(owner_id, outsider_id):
    create_schema(owner_id)
    UserSchema.objects.filter(user_id=owner_id).delete()
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner_id)}".actor_owner SET owner_id = %s', [outsider_id]
        )
    known.clear()
    with pytest.raises(SchemaNameCollision):
        create_schema(owner_id)
    assert not UserSchema.objects.filter(user_id=owner_id).exists()


def test_purge_drops_schema_and_registry_row_and_is_idempotent(
    owner_id, outsider_id, inline_actors
):
    for user in (owner_id, outsider_id):
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5)
    schema = schema_name_for(owner_id)
    assert purge_schema(owner_id) is True
    assert not _schema_exists(schema)
    assert not UserSchema.objects.filter(user_id=owner_id).exists()
    assert purge_schema(owner_id) is False
    assert _schema_exists(schema_name_for(outsider_id))


def test_a_live_account_whose_schema_vanished_gets_a_fresh_one(owner_id, inline_actors):
    UserMeter.call(owner_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5)
    with connection.cursor() as cursor:  # dropped behind this process's back: cache is stale
        cursor.execute(f'DROP SCHEMA "{schema_name_for(owner_id)}" CASCADE')
        cursor.execute("DELETE FROM kody_user_schemas WHERE user_id = %s", [owner_id])
    reading = UserMeter.call(
        owner_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5
    )
    assert reading["count"] == 1


def _consume(user_id: str) -> dict:
    return UserMeter.call(
        user_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=50
    )


def _registry(user_id: str) -> UserSchema | None:
    return UserSchema.objects.filter(user_id=user_id).first()


def test_an_id_with_no_account_never_gets_a_schema(inline_actors, user_schemas_cleanup):
    stranger = secrets.token_hex(32)
    with pytest.raises(NoLiveAccount):
        _consume(stranger)
    with pytest.raises(NoLiveAccount):
        create_schema(stranger)
    assert _registry(stranger) is None
    assert not _schema_exists(schema_name_for(stranger))


def test_a_call_queued_before_a_purge_does_not_resurrect_the_user(owner_id, inline_actors):
    from apps.accounts.models import User

    _consume(owner_id)
    queued = Call(
        id="queued-before-purge",
        user_id=owner_id,
        schema=schema_name_for(owner_id),
        actor=UserMeter.name,
        method="consume",
        kwargs={"resource": "execute_calls_per_day", "day": today_iso(), "limit": 50},
    )
    User.objects.filter(stable_user_id=owner_id).update(deleting_at=timezone.now())
    mark_deleting(owner_id)
    assert purge_schema(owner_id) is True
    User.objects.filter(stable_user_id=owner_id).delete()

    [outcome] = execute([queued])  # the worker gets to it after the purge
    with pytest.raises(AccountDeleting):
        outcome.unwrap()
    assert not _schema_exists(schema_name_for(owner_id))
    assert _registry(owner_id).deleting_at is not None  # the tombstone stays...

    finish_deletion(owner_id)  # ...until the deletion finishes
    assert _registry(owner_id) is None
    with pytest.raises(NoLiveAccount):
        execute([queued])[0].unwrap()  # still no account: still nothing created
    assert not _schema_exists(schema_name_for(owner_id))


def test_the_same_email_signs_up_again_after_the_deletion_finishes(inline_actors):
    from apps.accounts.models import User

    first = User.objects.create_user(username="again", email="again@example.test")
    uid = first.stable_user_id
    _consume(uid)
    _consume(uid)
    first.deleting_at = timezone.now()
    first.save(update_fields=["deleting_at"])
    mark_deleting(uid)
    purge_schema(uid)
    first.delete()
    # Signed up again while the deletion is still running: the tombstone refuses the calls.
    second = User.objects.create_user(username="again", email="again@example.test")
    assert second.stable_user_id == uid
    with pytest.raises(AccountDeleting):
        _consume(uid)
    finish_deletion(uid)
    assert _consume(uid)["count"] == 1  # a fresh schema, nothing of the old account's


def test_while_deleting_only_deletion_safe_methods_run(owner_id, outsider_id, inline_actors):
    from apps.accounts.models import User

    _consume(owner_id)
    _consume(outsider_id)
    User.objects.filter(stable_user_id=owner_id).update(deleting_at=timezone.now())
    mark_deleting(owner_id)  # what the deletion job's "mark" step does
    with pytest.raises(AccountDeleting) as refused:
        _consume(owner_id)
    assert refused.value.code == "account_deleting" and refused.value.status == 409
    exported = UserMeter.call(owner_id, "export_counters")  # deletion-safe: runs
    assert [row["count"] for row in exported["counters"]] == [1]
    assert UserMeter.call(owner_id, "purge")["deleted"]["daily_counters"] == 1
    assert _consume(outsider_id)["count"] == 2  # another user is untouched


def test_an_account_marked_for_deletion_never_gets_a_schema(owner_id, inline_actors):
    from apps.accounts.models import User

    User.objects.filter(stable_user_id=owner_id).update(deleting_at=timezone.now())
    with pytest.raises(AccountDeleting):
        _consume(owner_id)
    assert _registry(owner_id) is None
    assert not _schema_exists(schema_name_for(owner_id))


def test_the_kernel_tombstone_alone_fences_a_live_account(owner_id, outsider_id, inline_actors):
    _consume(owner_id)
    mark_deleting(owner_id)
    with pytest.raises(AccountDeleting):
        _consume(owner_id)
    assert UserMeter.call(owner_id, "read_deletion_state")["active_write_leases"] is not None
    assert _consume(outsider_id)["count"] == 1
    assert _registry(owner_id).alarm_at is None


def _old_schema(user_id: str) -> str:
    schema = create_schema(user_id, version=1, table_sets=None)  # made before lazy tables
    known.forget(user_id)
    assert "revision" not in _columns(schema)["daily_counters"]
    return schema


def test_v1_schema_upgrades_lazily_on_first_call(owner_id, inline_actors):
    assert schema_version() >= 2
    schema = _old_schema(owner_id)
    reading = UserMeter.call(
        owner_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5
    )
    assert reading["revision"] == 1
    assert "revision" in _columns(schema)["daily_counters"]
    assert UserSchema.objects.get(user_id=owner_id).version == schema_version()


def test_v1_schema_upgrades_by_command_twice_in_a_row(owner_id, outsider_id, capsys):
    for user in (owner_id, outsider_id):
        _old_schema(user)
    call_command("upgrade_user_schemas")
    first = capsys.readouterr().out
    assert "[1/2 (50%)" in first and "[2/2 (100%)" in first
    call_command("upgrade_user_schemas")
    assert "nothing to upgrade" in capsys.readouterr().out
    for user in (owner_id, outsider_id):
        assert UserSchema.objects.get(user_id=user).version == schema_version()
        assert "daily_counters_day_ix" in _index_names(schema_name_for(user))


def _index_names(schema: str) -> set[str]:
    with connection.cursor() as cursor:
        return introspect(cursor, schema).names


def test_upgrade_is_additive_and_idempotent_even_if_partly_applied(owner_id):
    schema = _old_schema(owner_id)
    with connection.cursor() as cursor:  # as if a crash had left the column but not the index
        cursor.execute(
            f'ALTER TABLE "{schema}".daily_counters ADD COLUMN revision bigint DEFAULT 0 NOT NULL'
        )
    plan = upgrade_schema(owner_id)
    daily = next(t for t in compile_schema().tables if t.table == "daily_counters")
    touched = [sql for sql in plan.statements if '"daily_counters"' in sql]
    assert touched == [daily.named["daily_counters_day_ix"]]  # other apps' newer tables may follow
    assert upgrade_schema(owner_id).statements == ()


def test_dry_run_reports_and_changes_nothing(owner_id, capsys):
    schema = _old_schema(owner_id)
    call_command("upgrade_user_schemas", "--dry-run")
    out = capsys.readouterr().out
    assert "would apply" in out and "revision" in out
    assert "revision" not in _columns(schema)["daily_counters"]
    assert UserSchema.objects.get(user_id=owner_id).version == 1


def test_ensure_schema_is_cached_after_commit(owner_id):
    schema = ensure_schema(owner_id)
    assert known.get(owner_id) == schema


def test_a_data_step_runs_once_per_schema_inside_the_upgrade(owner_id, monkeypatch):
    from kody.userschema import upgrades

    ran: list[str] = []

    def backfill(cursor) -> None:  # type: ignore[no-untyped-def]
        cursor.execute("SELECT current_setting('search_path')")
        ran.append(cursor.fetchone()[0])

    step = upgrades.UpgradeStep(version=schema_version(), name="tests.backfill", run=backfill)
    monkeypatch.setitem(upgrades._steps, step.name, step)
    _old_schema(owner_id)
    assert "tests.backfill" in upgrade_schema(owner_id).steps
    assert upgrade_schema(owner_id).steps == ()
    assert ran == [f"{schema_name_for(owner_id)}, public"]


LEGACY_INDEXES = (  # as schema versions 1-5 created them
    'CREATE INDEX "actor_calls_id_3e9d8c1f_like" ON {s}."actor_calls" ("id" varchar_pattern_ops)',
    'CREATE INDEX "runs_package_ix" ON {s}."runs" ("package_id", "started_at" DESC, "id" DESC)',
    'CREATE INDEX "email_threads_root_ix" ON {s}."email_threads" ("root_message_id_header")',
)


def _v5_schema_with_legacy_indexes(user: str) -> str:
    schema = create_schema(user, version=5, table_sets=None)
    known.forget(user)
    with connection.cursor() as cursor:
        for sql in LEGACY_INDEXES:
            cursor.execute(sql.format(s=f'"{schema}"'))
    return schema


def test_the_v6_upgrade_drops_unread_indexes_and_only_in_the_schema(owner_id, capsys):
    from kody.userschema.upgrades import LEAN_INDEXES, UNREAD_INDEXES

    assert schema_version() >= LEAN_INDEXES
    schema = _v5_schema_with_legacy_indexes(owner_id)
    assert {"runs_package_ix", "actor_calls_id_3e9d8c1f_like"} <= relation_names(schema, "i")
    with connection.cursor() as cursor:  # a public index with a dropped name must survive
        cursor.execute('CREATE INDEX "runs_package_ix" ON public.kody_user_schemas (user_id)')
    try:
        call_command("upgrade_user_schemas")
        assert "[1/1 (100%)" in capsys.readouterr().out
        assert not relation_names(schema, "i") & set(UNREAD_INDEXES)
        assert "runs_package_ix" in relation_names("public", "i")
        assert "runs_started_ix" in relation_names(schema, "i")  # the read ones stay
    finally:
        with connection.cursor() as cursor:
            cursor.execute('DROP INDEX IF EXISTS public."runs_package_ix"')


def test_the_v7_upgrade_drops_the_retired_meter_tables_and_only_in_the_schema(owner_id):
    from apps.entitlements.actor.upgrades import RETIRED_TABLES

    assert schema_version() >= RETIRED_TABLES
    schema = create_schema(owner_id, version=6, table_sets=None)
    known.forget(owner_id)
    with connection.cursor() as cursor:  # as versions 3-6 built them
        cursor.execute(
            f'CREATE TABLE "{schema}".dynamic_worker_days (day date, worker_id varchar(255),'
            " created_at timestamptz, PRIMARY KEY (day, worker_id))"
        )
        cursor.execute(
            f'CREATE TABLE "{schema}".inbound_mcp_connection_last_used'
            " (client_id varchar(255) PRIMARY KEY, last_used_at timestamptz)"
        )
        cursor.execute("CREATE TABLE public.dynamic_worker_days (day date)")  # not the schema's
    try:
        call_command("upgrade_user_schemas")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT relnamespace::regnamespace::text, relname FROM pg_class WHERE relkind = 'r'"
                " AND relname IN ('dynamic_worker_days', 'inbound_mcp_connection_last_used')"
            )
            left = set(cursor.fetchall())
        assert left == {("public", "dynamic_worker_days")}
        assert UserSchema.objects.get(user_id=owner_id).version == schema_version()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS public.dynamic_worker_days")
