"""RunLog's limits and self-pruning; StorageRunner buckets and their inventory row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.jobs.actor import RunLog, StorageRunner
from apps.jobs.actor.records import MAX_LOG_LINES, PRUNE_EVERY
from apps.jobs.services import storage
from apps.packages.models import UserStorageBucket
from kody.errors import InvalidInput

pytestmark = pytest.mark.django_db


def record(user, started: datetime, **extra):  # type: ignore[no-untyped-def]
    return RunLog.call(
        user.stable_user_id,
        "record",
        {
            "surface": "execute",
            "status": "success",
            "name": "probe",
            "started_at": started.isoformat(),
            "finished_at": started.isoformat(),
            **extra,
        },
        extra.pop("lines", None),
    )


def test_a_run_keeps_at_most_200_log_lines(owner):
    lines = [{"level": "info", "message": f"line {n}"} for n in range(250)]
    run_id = RunLog.call(
        owner.stable_user_id,
        "record",
        {
            "surface": "job",
            "status": "success",
            "name": "chatty",
            "started_at": "2031-01-01T00:00Z",
        },
        lines,
    )
    run = RunLog.call(owner.stable_user_id, "get_run", run_id)
    assert len(run["logs"]) == MAX_LOG_LINES and run["logs"][-1]["message"] == "line 199"
    assert run["metadata"]["droppedLogLines"] == 50


def test_runs_older_than_30_days_are_pruned_every_32_finishes(owner, frozen_clock):
    from django.utils import timezone

    now = timezone.now()
    old = record(owner, now - timedelta(days=31))
    for n in range(PRUNE_EVERY - 2):
        record(owner, now - timedelta(minutes=n))
    assert RunLog.call(owner.stable_user_id, "get_run", old) is not None
    record(owner, now)  # the 32nd finish prunes
    assert RunLog.call(owner.stable_user_id, "get_run", old) is None


def test_run_list_pages_newest_first_without_gaps(owner):
    base = datetime(2031, 1, 1, tzinfo=UTC)
    ids = [record(owner, base + timedelta(seconds=n)) for n in range(7)]
    seen, cursor = [], None
    while True:
        page = RunLog.call(owner.stable_user_id, "list_runs", {}, cursor, 3)
        seen += [r["id"] for r in page["runs"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))


def test_a_bucket_round_trips_and_registers_its_bytes(owner):
    uid = owner.stable_user_id
    storage.put(uid, "exec:3f1c", "b", [1, 2, 3])
    storage.put(uid, "exec:3f1c", "a", {"x": "y"})
    assert storage.get(uid, "exec:3f1c", "a") == {"found": True, "value": {"x": "y"}}
    assert [e["key"] for e in storage.list_keys(uid, "exec:3f1c")["entries"]] == ["a", "b"]
    bucket = UserStorageBucket.objects.get(user_id=uid, storage_id="exec:3f1c")
    assert bucket.kind == "execute" and bucket.estimated_bytes > 0
    assert bucket.estimated_bytes == StorageRunner.call(uid, "estimated_bytes", "exec:3f1c")
    storage.delete(uid, "exec:3f1c", "a")
    storage.delete(uid, "exec:3f1c", "b")
    assert not UserStorageBucket.objects.filter(user_id=uid, storage_id="exec:3f1c").exists()


@pytest.mark.parametrize(
    ("storage_id", "kind"),
    [("job:abc", "job"), ("package:pkg%2F1", "package"), ("service:svc", "service")],
)
def test_storage_id_prefixes_map_to_bucket_kinds(owner, storage_id, kind):
    storage.put(owner.stable_user_id, storage_id, "k", 1)
    assert UserStorageBucket.objects.get(storage_id=storage_id).kind == kind


def test_export_pages_a_bucket_in_key_order(owner):
    uid = owner.stable_user_id
    for n in range(5):
        storage.put(uid, "job:pages", f"k{n}", n)
    first = storage.export(uid, "job:pages", None, 2)
    second = storage.export(uid, "job:pages", first["nextCursor"], 2)
    third = storage.export(uid, "job:pages", second["nextCursor"], 2)
    keys = [e["key"] for page in (first, second, third) for e in page["entries"]]
    assert keys == ["k0", "k1", "k2", "k3", "k4"] and third["nextCursor"] is None


@pytest.mark.parametrize("bad", ["", " job:x", "job:x\n", "x" * 600])
def test_a_bad_storage_id_is_refused(owner, bad):
    with pytest.raises(InvalidInput):
        storage.put(owner.stable_user_id, bad, "k", 1)


def test_purge_and_export_hooks_cover_every_row(owner):
    uid = owner.stable_user_id
    storage.put(uid, "job:one", "k", 1)
    record(owner, datetime(2031, 1, 1, tzinfo=UTC))
    exported = RunLog.call(uid, "export_runs")
    assert exported["phase"] == "runs" and len(exported["items"]) == 1
    assert StorageRunner.call(uid, "export_storage")["entries"][0]["storageId"] == "job:one"
    assert RunLog.call(uid, "purge")["deleted"]["runs"] == 1
    assert StorageRunner.call(uid, "purge")["deleted"]["storage_entries"] == 1
    assert RunLog.call(uid, "list_runs", {}, None, 10)["runs"] == []


def test_a_finished_run_and_its_lines_are_written_in_one_statement(owner):
    """The run, its log lines and the finish count go out as ONE statement (one round trip,
    no ORM insert per table), with values stored as the ORM stores them: a missing metadata
    or line field is SQL NULL, not JSON null, and a line's time is the database's default."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from kody.userschema.naming import schema_name_for

    lines = [{"level": "warn", "message": "one", "fields": {"n": 1}}, {"message": "two"}]
    with CaptureQueriesContext(connection) as queries:
        run_id = record(owner, datetime(2031, 2, 1, tzinfo=UTC), lines=lines)
    writes = [q["sql"] for q in queries if "INSERT INTO runs" in q["sql"]]
    assert len(writes) == 1
    assert "INSERT INTO run_logs" in writes[0] and "run_log_meta" in writes[0]

    run = RunLog.call(owner.stable_user_id, "get_run", run_id)
    assert [(x["level"], x["message"], x["fields"]) for x in run["logs"]] == [
        ("warn", "one", {"n": 1}),
        ("info", "two", None),
    ]
    assert run["metadata"] is None and run["durationMs"] == 0
    schema = schema_name_for(owner.stable_user_id)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT metadata_json IS NULL FROM "{schema}".runs WHERE id = %s', [run_id])
        assert cursor.fetchone() == (True,)
        cursor.execute(
            f'SELECT sequence, fields_json IS NULL, logged_at IS NOT NULL FROM "{schema}".run_logs'
            " WHERE run_id = %s ORDER BY sequence",
            [run_id],
        )
        assert cursor.fetchall() == [(0, False, True), (1, True, True)]
