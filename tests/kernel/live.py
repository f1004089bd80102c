"""A live Kody web process for tests that need real HTTP, and a cable to its database that a
test can cut.

``serve(env)`` runs ``uvicorn config.asgi:application`` in a subprocess against this run's test
databases (as test_mcp_live does) and yields its URL. ``Cable`` is a TCP relay in front of the
embedded Postgres's Unix socket: the server connects through it, and ``cut()`` closes the
listener and every connection at once, which is what the server sees when Postgres is killed
(connections drop mid-query, new ones are refused) without touching the Postgres the rest of
the suite shares. ``mend()`` listens again on the same port.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx2
from django.conf import settings
from django.db import connections

BASE_DIR = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(alias: str, *, port: int | None = None) -> str:
    """The test database ``alias`` as a URL: on its own socket, or through 127.0.0.1:port."""
    db = connections[alias].settings_dict
    user = quote(db["USER"] or "", safe="")
    if port is not None:
        return f"postgres://{user}@127.0.0.1:{port}/{db['NAME']}"
    host = quote(db["HOST"] or "", safe="")
    return f"postgres://{user}@{host}{':' + db['PORT'] if db['PORT'] else ''}/{db['NAME']}"


def postgres_socket() -> str:
    db = connections["default"].settings_dict
    return os.path.join(db["HOST"], f".s.PGSQL.{db['PORT'] or 5432}")


class Cable:
    """127.0.0.1:port relayed to the Postgres socket, until ``cut()``."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def mend(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(512)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            upstream = socket.socket(socket.AF_UNIX)
            try:
                upstream.connect(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def wait_for_health(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited early:\n{log.read_text()}")
        with contextlib.suppress(httpx2.TransportError):
            if httpx2.get(url + "/healthz", timeout=5).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url}/healthz not ok within {seconds}s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def serve(env: dict[str, str], log: Path) -> Iterator[str]:
    """uvicorn serving config.asgi on a free port with ``env`` on top of this one's."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    full = {
        **os.environ,
        "DATABASE_URL": database_url("default"),
        "AUDIT_DATABASE_URL": database_url("audit"),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_SITE_URL": url,
        # No shard worker: actor calls (a mutating call's write lease) run in the web process.
        "KODY_ACTORS_INLINE": "1",
        **env,
    }
    command = [
        sys.executable, "-m", "uvicorn", "config.asgi:application",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=BASE_DIR, env=full, stdout=out, stderr=out)
    try:
        wait_for_health(url, proc, log, 60)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
