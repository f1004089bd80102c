"""Shared set-up for the kernel benchmarks: a dedicated database, a real shard worker, stats."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from config.env import envbool  # noqa: E402  (needs ROOT on the path)

# The benchmarks get their own database (test_kody_bench), migrated like a test database.
os.environ.setdefault("KODY_TEST_DB_SUFFIX", "_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Measured as deployed: DEBUG off (Django's debug cursor wrapper logs every query, a few per
# cent of a call's CPU), with a throwaway key, since production refuses to start without one.
# The shard workers a benchmark starts inherit both. ``KODY_DEBUG=1`` measures the dev setup.
os.environ.setdefault("KODY_DEBUG", "0")
if not envbool("KODY_DEBUG", True) and not os.environ.get("KODY_SECRET_KEY"):
    os.environ["KODY_SECRET_KEY"] = "benchmark-" + os.urandom(24).hex()


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (utime + stime from ``/proc``; 0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def postgres_pids() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time()")
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
        data = cursor.fetchone()[0]
    pid = int(Path(data, "postmaster.pid").read_text().split()[0])
    return [pid, *children(pid)]


def redis_pid() -> int | None:
    from kody.actors import transport

    info = transport.client().info("server")
    return int(info["process_id"])


def setup_django() -> None:
    import django

    django.setup()
    from django.db import connections

    # Every alias: the audit trail lives in a database of its own, and writes to it must land
    # in the benchmark's copy, not in a development database that may not exist.
    for alias in connections:
        connections[alias].creation.create_test_db(verbosity=0, keepdb=True)


def database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    host = quote(str(db["HOST"]), safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{db['USER']}:{quote(db['PASSWORD'] or '')}@{host}{port}/{db['NAME']}"


def psql_args() -> list[str]:
    from django.db import connection

    db = connection.settings_dict
    args = ["-h", str(db["HOST"]), "-U", db["USER"], "-d", db["NAME"]]
    if db.get("PORT"):
        args += ["-p", str(db["PORT"])]
    return args


def pg_binary(name: str) -> str:
    import shutil

    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
    return str(bundled) if bundled.exists() else (shutil.which(name) or name)


def clear_actor_keys() -> None:
    from kody.actors import transport

    client = transport.client()
    for key in client.scan_iter(match=transport.shard_keys_pattern()):
        client.delete(key)


@contextmanager
def shard_worker(
    extra_env: dict[str, str] | None = None, processes: int | None = None
) -> Iterator[list[subprocess.Popen]]:
    """Real Celery shard workers on the benchmark database, spread over processes the way
    ``manage.py up`` spreads them (``kody.actors.topology.shard_groups``): one process per
    group, ``processes`` of them (default ``topology.worker_processes()``)."""
    from django.conf import settings

    from kody.actors import transport
    from kody.actors.topology import shard_groups

    clear_actor_keys()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_ACTOR_SHARDS": str(settings.KODY_ACTOR_SHARDS),
        "KODY_ACTOR_LEASE_SECONDS": "2",
        **(extra_env or {}),
    }
    from kody.actors.topology import worker_processes

    count = worker_processes() if processes is None else processes
    procs = []
    for index, group in enumerate(shard_groups(settings.KODY_ACTOR_SHARDS, count)):
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-n",
            f"bench-actors{index}@%h",
            "-Q",
            ",".join(transport.queue_name(shard) for shard in group),
            "-P",
            "solo",
            "-c",
            "1",
            "-l",
            "WARNING",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
        ]
        procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL))
    try:
        client = transport.client()
        deadline = time.monotonic() + 60
        leases = [transport.lease_key(n) for n in range(settings.KODY_ACTOR_SHARDS)]
        while not all(client.exists(key) for key in leases):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("shard workers did not start")
            time.sleep(0.05)
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)


def celery_worker(queue: str) -> subprocess.Popen:
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL}
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "-Q",
        queue,
        "-P",
        "solo",
        "-c",
        "1",
        "-l",
        "WARNING",
        "--without-mingle",
        "--without-gossip",
        "--without-heartbeat",
        "-I",
        "benchmarks._celery_baseline",
    ]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def summary(samples_s: list[float], elapsed_s: float) -> dict[str, float]:
    return {
        "p50_ms": pct(samples_s, 0.50) * 1000,
        "p99_ms": pct(samples_s, 0.99) * 1000,
        "mean_ms": statistics.fmean(samples_s) * 1000,
        "per_s": len(samples_s) / elapsed_s,
    }


def row(label: str, stats: dict[str, float]) -> str:
    return (
        f"{label:46} p50 {stats['p50_ms']:7.2f} ms  p99 {stats['p99_ms']:7.2f} ms  "
        f"{stats['per_s']:8.0f} /s"
    )
