"""With DATABASE_URL set, ``migrate`` works against that server as is (no embedded start).

The "real server" here is the embedded Postgres reached purely through a URL: settings must
take the DATABASE_URL path, derive the audit database beside it, and both migrations must
apply from nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_databases():
    host = settings.DATABASES["default"]["HOST"]
    if not host.startswith("/"):
        pytest.skip("this test provisions throwaway databases on the embedded server")
    name = f"kody_url_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True)
    for db in (name, f"{name}_audit"):
        admin.execute(f'CREATE DATABASE "{db}"')
    try:
        yield host, name
    finally:
        for db in (name, f"{name}_audit"):
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_migrate_applies_to_a_database_url_and_its_audit_sibling(empty_databases, tmp_path):
    host, name = empty_databases
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@/{name}?host={host}",
        "REDIS_URL": settings.REDIS_URL,
        # A var dir with no embedded server in it: settings must not need one.
        "KODY_VAR_DIR": str(tmp_path / "var"),
    }
    for args in (("migrate",), ("migrate", "--database", "audit")):
        result = _run(env, *args, "--noinput")
        assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "var" / "postgres").exists()

    with psycopg.connect(host=host, user="postgres", dbname=name) as conn:
        tables = {
            r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        }
        assert {"users", "django_migrations"} <= tables
        assert "audit_events" not in tables
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone()
    with psycopg.connect(host=host, user="postgres", dbname=f"{name}_audit") as conn:
        tables = {
            r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        }
        assert "audit_events" in tables
        assert "users" not in tables
