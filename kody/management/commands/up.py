"""Run the whole of Kody in the foreground: migrations, web, workers and beat.

This is README command one's last step. Every child runs in its own process group; if any
child exits, the others are stopped and the command exits non-zero, so a supervisor (or a
person at a terminal) sees a failure instead of a half-running system. The embedded Postgres
and Redis (used when ``DATABASE_URL`` / ``REDIS_URL`` are unset) are watched the same way:
if either dies everything stops, and Ctrl-C stops them too, after the processes using them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from config.env import envstr
from kody import embedded
from kody.actors.topology import worker_commands


def _celery_commands(python: str) -> list[tuple[str, list[str]]]:
    return [(_name_of(argv), argv) for argv in worker_commands(python)]


class EmbeddedService:
    """An embedded server this command watches and stops: its pid, and how to stop it."""

    def __init__(self, name: str, pid: Any, stop: Any) -> None:
        self.name, self._pid, self._stop = name, pid, stop
        self.pid = pid()

    def alive(self) -> bool:
        return embedded.alive(self.pid)

    def stop(self) -> None:
        if self.alive():
            self._stop()


def _embedded_services() -> list[EmbeddedService]:
    services = []
    if not envstr("DATABASE_URL"):
        services.append(EmbeddedService("postgres", embedded.postgres_pid, embedded.stop_postgres))
    if not envstr("REDIS_URL"):
        services.append(EmbeddedService("redis", embedded.redis_pid, embedded.stop_redis))
    return [service for service in services if service.pid is not None]


DEFAULT_SITE_URL = "http://127.0.0.1:8000"


def _site_url(host: str, port: int) -> tuple[str, dict[str, str]]:
    """The URL mail links use: KODY_SITE_URL when set, else where this server listens. The
    children (web and workers) get it in their environment."""
    env = dict(os.environ)
    if env.get("KODY_SITE_URL"):
        return env["KODY_SITE_URL"].rstrip("/"), env
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    env["KODY_SITE_URL"] = f"http://{shown}:{port}"
    return env["KODY_SITE_URL"], env


def _name_of(argv: list[str]) -> str:
    if "beat" in argv:
        return "beat"
    if "-Q" in argv:
        return "worker[" + argv[argv.index("-Q") + 1] + "]"
    return "worker"


def operator_hint(site_url: str) -> str | None:
    """How to create the first operator, or None once a staff account exists."""
    from django.contrib.auth import get_user_model

    if get_user_model().objects.filter(is_staff=True).exists():
        return None
    # Links the command prints must point where this server listens, from any shell.
    prefix = "" if site_url == DEFAULT_SITE_URL else f"KODY_SITE_URL={site_url} "
    url = site_url.rstrip("/") + "/"
    return (
        "Create the first operator account (it asks for a password) with:\n"
        f"  {prefix}.venv/bin/python manage.py create_user you@example.com --username you "
        "--staff\n"
        f"then sign in at {url}admin/ ."
    )


def _wait_until_listening(
    host: str, port: int, procs: list[tuple[str, subprocess.Popen]], seconds: float = 60
) -> None:
    """Until the web process accepts connections (its banner is out by then), or gives up."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(proc.poll() is not None for _, proc in procs):
            return  # the supervisor reports it
        try:
            with socket.create_connection((host, port), timeout=0.5):
                pass
        except OSError:
            time.sleep(0.2)
            continue
        time.sleep(0.5)  # the workers' banners print as quickly as the web's
        return


class Command(BaseCommand):
    help = "Apply migrations, then run web (uvicorn), Celery workers and beat until interrupted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("KODY_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("KODY_PORT", "8000")))
        parser.add_argument("--no-workers", action="store_true", help="Run the web process only.")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("migrate", database="audit", interactive=False, verbosity=0)
        self.stdout.write("Migrations applied (default and audit).")

        python = sys.executable
        children = [
            (
                "web",
                [
                    python,
                    "-m",
                    "uvicorn",
                    "config.asgi:application",
                    "--host",
                    options["host"],
                    "--port",
                    str(options["port"]),
                    "--app-dir",
                    str(settings.BASE_DIR),
                ],
            )
        ]
        if not options["no_workers"]:
            children += _celery_commands(python)

        services = _embedded_services()
        site_url, env = _site_url(options["host"], options["port"])
        procs = [
            (name, subprocess.Popen(argv, start_new_session=True, env=env))
            for name, argv in children
        ]
        url = site_url.rstrip("/") + "/"
        self.stdout.write(self.style.SUCCESS(f"Kody is starting: open {url}"))
        self.stdout.write(
            "Processes: "
            + ", ".join(
                [f"{name} (pid {proc.pid})" for name, proc in procs]
                + [f"embedded {service.name} (pid {service.pid})" for service in services]
            )
        )
        sys.stdout.flush()
        # The hint comes last, under the children's start-up banners, so it is what a person
        # sees; once the web answers (or gives up), and only while there is no operator.
        _wait_until_listening(options["host"], options["port"], procs)
        hint = operator_hint(site_url)
        if hint:
            self.stdout.write(hint)
        self.stdout.write("Stop everything with Ctrl-C.")
        sys.stdout.flush()
        code = self._supervise(procs, services)
        sys.exit(code)

    def _supervise(
        self, procs: list[tuple[str, subprocess.Popen]], services: list[EmbeddedService]
    ) -> int:
        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        exited: tuple[str, int] | None = None
        while not stopping and exited is None:
            for name, proc in procs:
                if proc.poll() is not None:
                    exited = (name, proc.returncode)
                    break
            for service in services:
                if exited is None and not service.alive():
                    exited = (f"embedded {service.name}", -1)
            time.sleep(0.2)
        for _, proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        # Redis first (its append-only file is flushed on shutdown), then Postgres.
        for service in reversed(services):
            try:
                service.stop()
            except Exception as exc:
                self.stderr.write(f"could not stop embedded {service.name}: {exc}")
        if services:
            self.stdout.write("Stopped " + ", ".join(f"embedded {s.name}" for s in services) + ".")
        if exited is not None:
            self.stderr.write(f"{exited[0]} exited with status {exited[1]}; stopped the rest.")
            return 1
        return 0
