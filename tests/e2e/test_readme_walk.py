"""The README, literally: ``KODY_PORT=<port> manage.py up``, the create-operator line it prints,
the operator signs in to /admin/ and sees models; a person signs up, follows the mailed link
(on the port ``up`` serves), signs in, mints a token and calls ``/api/v1/`` and ``/mcp``.

``up`` runs against this run's test databases (as test_mcp_live does), so no second embedded
Postgres is initialised; it runs the web process only, with actors inline, to keep the run
short — test_command_one covers the workers. Mail goes to the console backend, i.e. ``up``'s
output, which is where the links are read from.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.conf import settings

from tests.kernel.test_mcp_live import database_url, free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "lantern-harbour-quiet-77"
RUN = uuid.uuid4().hex[:8]


class Up:
    """``manage.py up`` in the background, its output collected line by line."""

    def __init__(self, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if k != "KODY_SITE_URL"}
        env.update(
            KODY_PORT=str(port),
            DATABASE_URL=database_url("default"),
            AUDIT_DATABASE_URL=database_url("audit"),
            REDIS_URL=settings.REDIS_URL,
            KODY_DB_CONN_MAX_AGE="0",
            KODY_ACTORS_INLINE="1",
            KODY_EMAIL_BACKEND="django.core.mail.backends.console.EmailBackend",
        )
        self.env = env
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--no-workers"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, seconds: float = 90) -> re.Match[str]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.proc.poll() is not None:
                raise AssertionError("up exited:\n" + "\n".join(self.lines))
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} in:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def up(django_db_setup: None) -> Iterator[tuple[Up, str]]:
    port = free_port()
    server = Up(port)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx2.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "\n".join(server.lines)
            time.sleep(0.3)
        yield server, url
    finally:
        server.stop()


def run_in_terminal(command: str, env: dict[str, str], answers: list[str]) -> str:
    """Run a printed shell line as a person would: on a terminal, typing the answers."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["bash", "-c", command], cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    output = b""
    for answer in answers:
        while b"assword" not in output.split(b"\n")[-1]:
            output += os.read(master, 4096)
        os.write(master, answer.encode() + b"\n")
        output = output.rsplit(b"\n", 1)[0] + b"\n"
    assert proc.wait(timeout=60) == 0
    try:
        while chunk := os.read(master, 4096):
            output += chunk
    except OSError:
        pass
    os.close(master)
    return output.decode(errors="replace")


def test_the_readme_works_as_printed(browser: Any, up: tuple[Up, str]) -> None:
    from playwright.sync_api import expect

    server, url = up
    server.wait_for(re.escape(f"Kody is starting: open {url}/"))
    step = server.wait_for(r"^\s+(.*manage\.py create_user you@example\.com .*--staff)\s*$")
    # The printed line, with only the README's placeholder name made unique to this run.
    command = step.group(1).replace("you@example.com", f"op{RUN}@example.com")
    command = command.replace("--username you", f"--username op{RUN}")
    env = {k: v for k, v in server.env.items() if k not in ("KODY_PORT", "KODY_SITE_URL")}
    created = run_in_terminal(command, env, [PASSWORD, PASSWORD])
    assert f"Created staff user op{RUN}" in created, created

    admin = browser.new_context().new_page()
    admin.goto(f"{url}/admin/")
    admin.get_by_label("Username").fill(f"op{RUN}")
    admin.get_by_label("Password").fill(PASSWORD)
    admin.get_by_role("button", name="Log in").click()
    expect(admin.get_by_role("link", name="Community reports")).to_be_visible()
    expect(admin.get_by_text("have permission to view or edit anything")).to_have_count(0)

    page = browser.new_context().new_page()
    email = f"reader.{RUN}@example.com"
    page.goto(f"{url}/signup")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Username").fill(f"reader-{RUN}")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    link = server.wait_for(r"(https?://\S+/verify\?token=[\w\-]+)").group(1)
    assert link.startswith(f"{url}/verify?token="), link
    page.goto(link)
    page.get_by_role("button", name="Verify email address").click()
    expect(page.get_by_role("heading", name="Email verified")).to_be_visible()

    page.goto(f"{url}/login")
    page.get_by_label("Email or username").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Connections").click()
    page.get_by_label("Token name").fill("readme agent")
    page.get_by_role("button", name="Create token").click()
    raw = page.get_by_test_id("new-token").inner_text().strip()

    auth = {"Authorization": f"Bearer {raw}"}
    index = httpx2.get(f"{url}/api/v1/", headers=auth, timeout=30)
    assert index.status_code == 200 and index.json()["authenticated"] is True
    assert "whoami" in {c["name"] for c in index.json()["capabilities"]}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "whoami", "arguments": {}}
    mcp = httpx2.post(
        f"{url}/mcp",
        content=json.dumps(call),
        headers={
            **auth,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    assert mcp.status_code == 200, mcp.text
    assert mcp.json()["result"]["structuredContent"]["email"] == email
