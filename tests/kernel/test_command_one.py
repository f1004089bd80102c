"""README command one's last step, end to end: ``manage.py up`` on a fresh ``var/``.

Runs in a brand-new KODY_VAR_DIR, so it also proves the embedded Postgres and Redis come up
from nothing, migrations apply to both databases, and every child stops with the parent.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


ACTOR_CALL = """
from django.utils import timezone
from apps.accounts.models import User
from apps.entitlements.actor import UserMeter
user = User.objects.create_user(username="up-check", email="up-check@example.test")
r = UserMeter.call(user.stable_user_id, "consume", resource="execute_calls_per_day",
                   day=timezone.now().date().isoformat(), limit=5, timeout=60)
print(f"allowed={r['allowed']} count={r['count']}")
"""


SCHEDULE_TASKS = """
from django_celery_beat.models import PeriodicTask
print(sorted(PeriodicTask.objects.values_list("task", flat=True)))
"""
DATABASE_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"


def _child_argvs(parent: int) -> list[list[str]]:
    """The command lines of ``parent``'s live children, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent:
                found.append((entry / "cmdline").read_bytes().decode().split("\0")[:-1])
        except (OSError, ValueError, IndexError):
            continue  # the process went away while we looked
    return found


def _schedule_tasks(env: dict[str, str], wanted: str, seconds: float = 240) -> str:
    """The schedule beat keeps in the database, once it holds ``wanted``."""
    deadline = time.monotonic() + seconds
    out = ""
    while time.monotonic() < deadline:
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SCHEDULE_TASKS],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        if wanted in out:
            break
        time.sleep(1)
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


@pytest.fixture
def fresh_env(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "AUDIT_DATABASE_URL", "REDIS_URL")
    }
    env["KODY_VAR_DIR"] = str(tmp_path / "var")
    return env


def _wait_for(url: str, proc: subprocess.Popen, seconds: float = 240) -> tuple[int, str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"manage.py up exited early with {proc.returncode}")
        try:
            return _get(url)
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {seconds}s")


def _stop_embedded(var: Path) -> None:
    pg = var / "postgres"
    if pg.exists():
        import pgserver  # noqa: F401  (pg_ctl ships with it)
        from pgserver._commands import pg_ctl

        try:
            pg_ctl(["-w", "stop"], pgdata=pg, user="pgserver")
        except Exception:
            pass
    pid = var / "redis" / "redis.pid"
    if pid.exists():
        try:
            os.kill(int(pid.read_text().strip()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass


def _embedded_pids(var: Path) -> dict[str, int | None]:
    from kody import embedded

    return {
        "postgres": embedded.postgres_pid(var / "postgres"),
        "redis": embedded.redis_pid(var / "redis"),
    }


def _alive(pid: int | None) -> bool:
    from kody import embedded

    return embedded.alive(pid)


def test_up_serves_the_site_and_stops_every_child(fresh_env):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port)],
        cwd=ROOT,
        env=fresh_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    var = Path(fresh_env["KODY_VAR_DIR"])
    try:
        status, body = _wait_for(f"http://127.0.0.1:{port}/", proc)
        assert status == 200
        assert "Kody" in body
        assert _get(f"http://127.0.0.1:{port}/healthz") == (
            200,
            '{"status": "ok", "database": "ok", "audit_database": "ok", "broker": "ok"}',
        )
        services = _embedded_pids(var)
        assert all(_alive(pid) for pid in services.values()), services
        # The shard workers it started answer an actor call through the real queue.
        reply = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", ACTOR_CALL],
            cwd=ROOT,
            env={**fresh_env, "KODY_ACTORS_INLINE": "0"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "allowed=True count=1" in reply.stdout, reply.stdout + reply.stderr
        # Beat runs django-celery-beat's DatabaseScheduler: its command line says so, and on
        # start-up it writes its default entries next to the migrated dispatcher row.
        beats = [argv for argv in _child_argvs(proc.pid) if "beat" in argv]
        assert len(beats) == 1, _child_argvs(proc.pid)
        assert beats[0][beats[0].index("-S") + 1] == DATABASE_SCHEDULER
        tasks = _schedule_tasks(fresh_env, "celery.backend_cleanup")
        assert "'celery.backend_cleanup'" in tasks and "'kody.lanes.dispatch'" in tasks, tasks
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        _stop_embedded(var)
    assert proc.returncode == 0, output
    assert f"open http://127.0.0.1:{port}/" in output
    # The operator hint is said once, under the web's start-up banner, not lost above it.
    assert output.count("manage.py create_user") == 1, output
    assert output.index("manage.py create_user") > output.index("Uvicorn running on"), output
    # Ctrl-C (SIGTERM here) stopped the embedded Postgres and Redis too.
    assert not any(_alive(pid) for pid in services.values()), (services, output)
    assert "Stopped embedded postgres, embedded redis." in output
    # Nothing the supervisor started is left behind.
    leftovers = subprocess.run(
        ["pgrep", "-f", f"--port {port}"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


def test_up_stops_everything_when_the_embedded_redis_dies(fresh_env):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port), "--no-workers"],
        cwd=ROOT,
        env=fresh_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    var = Path(fresh_env["KODY_VAR_DIR"])
    try:
        _wait_for(f"http://127.0.0.1:{port}/healthz", proc)
        services = _embedded_pids(var)
        os.kill(services["redis"], signal.SIGKILL)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
        _stop_embedded(var)
    assert proc.returncode == 1, output
    assert "embedded redis exited" in output
    assert not _alive(services["postgres"]), output  # stopped with the rest
    leftovers = subprocess.run(
        ["pgrep", "-f", f"--port {port}"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []
