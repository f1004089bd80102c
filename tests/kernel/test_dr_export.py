"""The nightly disaster-recovery export: its cadence, a canonical and resumable export, the
watchdog that fails loudly, and a restore of one export into an empty, migrated database."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import dj_database_url
import psycopg
import pytest
from django.conf import settings
from django.core import mail
from django.utils import timezone

from apps.entitlements.models import UsageRollup
from kody import health
from kody.blobs import bucket
from kody.dr import export, lanes
from kody.lanes import run_lane
from kody.lanes.registry import Cadence, is_due
from tests.accounts.factories import AuditEventFactory
from tests.system_email.factories import SystemEmailMessageFactory, SystemEmailThreadFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

ROOT = Path(__file__).resolve().parents[2]


def at(hour: int, minute: int) -> datetime:
    return datetime(2031, 3, 14, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cadence", "when", "due"),
    [
        (Cadence.NIGHTLY_WINDOW, at(0, 29), False),
        (Cadence.NIGHTLY_WINDOW, at(0, 30), True),
        (Cadence.NIGHTLY_WINDOW, at(3, 7), True),
        (Cadence.NIGHTLY_WINDOW, at(6, 9), True),
        (Cadence.NIGHTLY_WINDOW, at(6, 10), False),
        (Cadence.NIGHTLY_WINDOW, at(12, 15), True),  # the quarter-hourly catch-up
        (Cadence.NIGHTLY_WINDOW, at(12, 7), False),
        (Cadence.MORNING_CHECK, at(6, 14), False),
        (Cadence.MORNING_CHECK, at(6, 15), True),
        (Cadence.MORNING_CHECK, at(6, 19), True),
        (Cadence.MORNING_CHECK, at(6, 20), False),
    ],
)
def test_cadences(cadence, when, due):
    assert is_due(cadence, when) is due


def test_a_run_before_the_window_belongs_to_the_previous_night():
    assert export.night_of(at(0, 29)) == date(2031, 3, 13)
    assert export.night_of(at(0, 30)) == date(2031, 3, 14)


@pytest.fixture
def dr_bucket(settings, tmp_path) -> Path:
    """The bucket on a fresh folder, where a subprocess with ``KODY_VAR_DIR`` finds it too."""
    root = tmp_path / "var" / "blobs" / "dr_exports"
    storages = dict(settings.STORAGES)
    storages["dr_exports"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(root)},
    }
    settings.STORAGES = storages
    return root


def finish(now: datetime) -> str:
    return export.run(now, {}, lambda state: None, lambda: False)


def some_data(owner) -> None:
    UsageRollup.objects.create(
        user_id=owner.stable_user_id, metric="execute_calls_per_day", month="2031-03", event_count=7
    )
    thread = SystemEmailThreadFactory()
    SystemEmailMessageFactory(thread=thread, subject="kept across the restore")
    AuditEventFactory(category="auth", action="login", result="failure", reason="bad_password")


def test_the_export_covers_every_shared_table_with_checksummed_parts(
    frozen_clock, dr_bucket, owner
):
    some_data(owner)
    assert finish(timezone.now()) == "finished"
    summary = export.read_summary(export.night_of(timezone.now()))
    assert set(summary["tables"]) == {
        f"{alias}/{t}" for alias in export.aliases() for t in export.shared_tables(alias)
    }
    assert "audit/audit_events" in summary["tables"]
    assert "default/kody_user_schemas" in summary["tables"]  # the per-user schemas' registry
    users = summary["tables"]["default/users"]
    assert users["rows"] == 1
    [part] = users["parts"]
    body = (dr_bucket / part["key"]).read_bytes()
    assert hashlib.sha256(body).hexdigest() == part["sha256"]
    [row] = [json.loads(line) for line in gzip.decompress(body).decode().splitlines()]
    assert row["stable_user_id"] == owner.stable_user_id
    assert finish(timezone.now()) == "done"  # the night is written once


def test_two_exports_of_the_same_data_are_byte_identical(frozen_clock, dr_bucket, owner):
    some_data(owner)
    finish(timezone.now())
    first = export.read_summary(export.night_of(timezone.now()))["tables"]
    bucket(export.BUCKET).delete(export.summary_key(export.night_of(timezone.now())))
    finish(timezone.now())
    second = export.read_summary(export.night_of(timezone.now()))["tables"]
    assert first == second


def test_the_export_resumes_table_by_table(frozen_clock, dr_bucket, owner):
    saved: list[dict] = []
    budget = iter([False, False, True])
    state: dict = {}
    assert export.run(timezone.now(), state, saved.append, lambda: next(budget)) == "partial"
    assert len(saved[-1]["tables"]) == 2
    again = export.run(timezone.now(), saved[-1], saved.append, lambda: False)
    assert again == "finished" and saved[-1] == {"finished": "2031-03-14"}


def test_the_lane_records_its_progress_in_its_cursor(frozen_clock, dr_bucket, owner):
    run = run_lane("dr_export")
    assert run is not None and run.counts == {"finished": 1}
    assert health.dr_export()["status"] == "ok"


def test_the_watchdog_mails_and_fails_when_the_night_is_missing(frozen_clock, dr_bucket, settings):
    settings.KODY_OPERATOR_ALERT_EMAILS = ["ops@example.org"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    frozen_clock.move_to(at(6, 16))
    with pytest.raises(lanes.DrExportMissing):
        run_lane("dr_export_watchdog")
    [message] = mail.outbox
    assert message.to == ["ops@example.org"] and "2031-03-14" in message.subject
    assert health.dr_export()["status"] == "red"
    page = health.report()["dr_export"]
    assert page["available"] and page["status"] == "red"


def test_the_watchdog_is_quiet_when_the_night_is_written(frozen_clock, dr_bucket, owner):
    frozen_clock.move_to(at(5, 0))
    finish(timezone.now())
    frozen_clock.move_to(at(6, 16))
    run = run_lane("dr_export_watchdog")
    assert run is not None and run.counts == {"present": 1} and mail.outbox == []


# --- restore --------------------------------------------------------------------------------


def server() -> dict[str, Any]:
    """How the test run reaches its Postgres server (a Unix socket or TCP, with whatever
    port, user and password it was configured with): the restore goes to the same server."""
    db = settings.DATABASES["default"]
    params = {
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
    }
    # OPTIONS also holds Django's own settings (e.g. ``pool``): keep what libpq understands.
    libpq = {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults()}
    options = {k: v for k, v in (db.get("OPTIONS") or {}).items() if k in libpq}
    return {k: v for k, v in params.items() if v is not None} | options


def database_url(name: str) -> str:
    """``DATABASE_URL`` for database ``name`` on the test run's server."""
    params = server()
    user = quote(str(params.get("user", "")), safe="")
    secret = f":{quote(str(params['password']), safe='')}" if "password" in params else ""
    host, port = str(params.get("host", "")), params.get("port")
    query = {k: str(v) for k, v in params.items() if k not in ("host", "port", "user", "password")}
    if host.startswith("/"):  # a socket directory travels as a query parameter
        query = {"host": host, **({"port": str(port)} if port else {}), **query}
        location = ""
    else:
        location = f"{host}:{port}" if port else host
    suffix = f"?{urlencode(query)}" if query else ""
    return f"postgres://{user}{secret}@{location}/{name}{suffix}"


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        (
            {"HOST": "db.internal", "PORT": "6432", "USER": "kody", "PASSWORD": "p@ss:w/rd"},
            {"HOST": "db.internal", "PORT": 6432, "USER": "kody", "PASSWORD": "p@ss:w/rd"},
        ),
        (
            {"HOST": "/run/pg", "PORT": "", "USER": "postgres", "PASSWORD": ""},
            {"HOST": "/run/pg", "USER": "postgres"},
        ),
    ],
)
def test_the_restore_target_is_reached_over_tcp_and_over_a_socket(
    monkeypatch, configured, expected
):
    monkeypatch.setitem(
        settings.DATABASES, "default", {**settings.DATABASES["default"], **configured}
    )
    parsed = dj_database_url.parse(database_url("kody_dr_x"))
    # dj-database-url hands a socket directory to libpq as the ``host`` option.
    parsed["HOST"] = parsed["HOST"] or parsed["OPTIONS"].get("host", "")
    assert parsed["NAME"] == "kody_dr_x"
    assert {k: parsed[k] for k in expected} == expected
    assert server()["host"] == configured["HOST"]


@pytest.fixture
def empty_databases():
    # Over a socket or TCP alike; a server that refuses CREATE DATABASE fails the test loudly.
    name = f"kody_dr_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(**server(), dbname="postgres", autocommit=True)
    for db in (name, f"{name}_audit"):
        admin.execute(f'CREATE DATABASE "{db}"')
    try:
        yield name
    finally:
        for db in (name, f"{name}_audit"):
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_an_export_restores_into_an_empty_database(
    frozen_clock, dr_bucket, owner, outsider, empty_databases, tmp_path
):
    some_data(owner)
    finish(timezone.now())
    night = export.night_of(timezone.now()).isoformat()
    name = empty_databases
    env = {
        **os.environ,
        "DATABASE_URL": database_url(name),
        "AUDIT_DATABASE_URL": database_url(f"{name}_audit"),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_VAR_DIR": str(tmp_path / "var"),
    }
    for args in (("migrate",), ("migrate", "--database", "audit")):
        manage(env, *args, "--noinput")
    assert night in manage(env, "dr_restore", "--list").stdout
    done = manage(env, "dr_restore", night)
    assert f"restored night={night}" in done.stdout

    with psycopg.connect(**server(), dbname=name) as conn:
        users = conn.execute("SELECT stable_user_id FROM users ORDER BY stable_user_id").fetchall()
        assert [u for (u,) in users] == sorted([owner.stable_user_id, outsider.stable_user_id])
        assert conn.execute(
            "SELECT event_count FROM usage_rollups WHERE user_id = %s", [owner.stable_user_id]
        ).fetchone() == (7,)
        assert conn.execute(
            "SELECT count(*) FROM system_email_messages m JOIN system_email_threads t "
            "ON t.id = m.thread_id WHERE m.subject = 'kept across the restore'"
        ).fetchone() == (1,)
        # Sequences moved past the restored ids: the next user gets a fresh id.
        top = conn.execute("SELECT max(id) FROM users").fetchone()[0]
        nxt = conn.execute("SELECT nextval(pg_get_serial_sequence('users', 'id'))").fetchone()[0]
        assert nxt > top
    with psycopg.connect(**server(), dbname=f"{name}_audit") as conn:
        assert conn.execute(
            "SELECT count(*) FROM audit_events WHERE reason = 'bad_password'"
        ).fetchone() == (1,)

    # A second restore into the now populated target is refused: nothing is overwritten.
    again = subprocess.run(
        [sys.executable, "manage.py", "dr_restore", night],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert again.returncode != 0 and "dr_restore_refused" in again.stderr


def budget_of(parts: int):  # type: ignore[no-untyped-def]
    """A run's ``out_of_time``: ``parts`` checks pass, the next one says time is up."""
    checks = iter(range(parts + 1))
    return lambda: next(checks) >= parts


def test_a_table_too_big_for_one_run_resumes_inside_it(frozen_clock, dr_bucket, owner, monkeypatch):
    """Parts of two rows and a budget of three parts a run: audit_events (seven rows) spans
    runs, each run picks up after the last key written, and the result equals an export done
    in one go — every row once, in key order."""
    monkeypatch.setattr(export, "PART_ROWS", 2)
    for n in range(7):
        AuditEventFactory(category="auth", action="login", result="failure", reason=f"r{n}")
    night = export.night_of(timezone.now())

    saved: list[dict] = [{}]
    runs, inside = 0, []
    while True:
        runs += 1
        status = export.run(timezone.now(), saved[-1], saved.append, budget_of(3))
        if status == "finished":
            break
        assert status == "partial" and runs < 200
        current = saved[-1].get("current")
        if current and current["table"] == "audit/audit_events":
            inside.append(len(current["parts"]))
    # The big table was left half-done by a run and carried on, never restarted.
    assert inside and inside == sorted(inside) and inside[0] < 4

    resumed = export.read_summary(night)["tables"]
    entry = resumed["audit/audit_events"]
    assert entry["rows"] == 7 and len(entry["parts"]) == 4
    rows = [
        json.loads(line)
        for part in entry["parts"]
        for line in gzip.decompress((dr_bucket / part["key"]).read_bytes()).decode().splitlines()
    ]
    ids = [row["id"] for row in rows]
    assert ids == sorted(ids) and len(set(ids)) == 7
    assert sorted(row["reason"] for row in rows) == [f"r{n}" for n in range(7)]

    bucket(export.BUCKET).delete(export.summary_key(night))
    assert finish(timezone.now()) == "finished"
    assert export.read_summary(night)["tables"] == resumed
