"""The README, literally, on a machine of its own: ``KODY_PORT=<port> ./scripts/up`` in a fresh
``KODY_VAR_DIR`` (its own embedded Postgres and Redis, so nothing touches the test databases),
the create-operator line it prints, the operator signs in to /admin/ and sees models; a person
signs up in the browser, follows the mailed link (on the port ``up`` serves), mints a token at
/account/connections and calls ``/api/v1/`` and ``/mcp`` with the official MCP SDK client.

Web, the shard workers and beat run exactly as ``up`` starts them: no inline actors, so every
page that reads a person's own state goes through the real queue. Development mail goes to the
console backend, i.e. ``up``'s output, which is where the verification link is read from.
A failed run reports ``up``'s whole output (printed at teardown, which pytest shows for failed
tests); teardown stops ``up`` by its process group, then whatever it started, then the
embedded servers.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.kernel.test_command_one import _stop_embedded
from tests.kernel.test_mcp_live import free_port, with_session

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "lantern-harbour-quiet-77"
# A fresh var/ means initdb and every migration on both databases: slow on a busy machine.
START_SECONDS = 420
STEP_SECONDS = 120
# What a newcomer's shell does not have: this test run's databases, broker and test switches.
NOT_IN_A_NEWCOMERS_SHELL = (
    "DATABASE_URL",
    "AUDIT_DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "KODY_SITE_URL",
    "KODY_HOST",
    "KODY_PORT",
    "KODY_ACTORS_INLINE",
    "KODY_EMAIL_BACKEND",
    "KODY_TEST_DB_SUFFIX",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "XDG_RUNTIME_DIR",
)


class Up:
    """``./scripts/up`` in the background, its output collected line by line."""

    def __init__(self, port: int, var: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if k not in NOT_IN_A_NEWCOMERS_SHELL}
        self.env["KODY_VAR_DIR"] = str(var)
        self.var, self.port = var, port
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            ["./scripts/up"],
            cwd=ROOT,
            env={**self.env, "KODY_PORT": str(port)},
            stdin=subprocess.DEVNULL,
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

    def output(self) -> str:
        return "\n".join(["--- ./scripts/up output ---", *self.lines, "--- end ---"])

    def fail(self, why: str) -> None:
        pytest.fail(f"{why} (./scripts/up's output: 'Captured stdout teardown')", pytrace=False)

    def wait_for(self, pattern: str, seconds: float = STEP_SECONDS) -> re.Match[str]:
        """The first line of up's output matching ``pattern``, waiting for it if need be."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := re.search(pattern, line):
                    return found
            if self.proc.poll() is not None:
                time.sleep(0.5)  # let the reader take the last lines
                self.fail(f"./scripts/up exited with {self.proc.returncode} before {pattern!r}")
            time.sleep(0.2)
        self.fail(f"./scripts/up printed no {pattern!r} within {seconds:.0f}s")
        raise AssertionError  # unreachable: fail() raises

    def wait_healthy(self, url: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                time.sleep(0.5)
                self.fail(f"./scripts/up exited with {self.proc.returncode} before serving")
            try:
                health = httpx2.get(url + "/healthz", timeout=5)
                if health.status_code == 200 and health.json().get("broker") == "ok":
                    return
                last = f"{health.status_code} {health.text}"
            except httpx2.TransportError as exc:
                last = repr(exc)
            time.sleep(0.5)
        self.fail(f"{url}/healthz not ok within {START_SECONDS}s (last: {last})")

    def stop(self) -> None:
        """Ctrl-C as README says, by process group; then whatever is left, by force."""
        child_pids = _child_pids(self.proc.pid)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for pid in child_pids:  # each child runs in a process group of its own
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _stop_embedded(self.var)


def _child_pids(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    pids.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return pids


@pytest.fixture
def up() -> Iterator[tuple[Up, str]]:
    if not Path(ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv: ./scripts/test creates it")
    var = Path(tempfile.mkdtemp(prefix="kody-readme-"))
    port = free_port()
    server = Up(port, var)
    url = f"http://127.0.0.1:{port}"
    try:
        server.wait_healthy(url)
        yield server, url
    finally:
        server.stop()
        shutil.rmtree(var, ignore_errors=True)
        # pytest shows captured output only for a failed test: whatever failed (a step of ours,
        # a Playwright expectation, the SDK client), the report carries everything up printed.
        print(server.output())


def test_the_readme_works_as_printed(browser: Any, up: tuple[Up, str]) -> None:
    from playwright.sync_api import expect

    server, url = up
    server.wait_for(re.escape(f"Kody is starting: open {url}/"))
    processes = server.wait_for(r"^Processes: (.*)$").group(1)
    for child in ("web (pid", "worker[", "beat (pid", "embedded postgres", "embedded redis"):
        if child not in processes:
            server.fail(f"up did not start {child!r}: {processes}")

    # The printed line, run in the checkout as a newcomer would; scripts pass --password-stdin.
    step = server.wait_for(r"^\s+(\S*.*manage\.py create_user you@example\.com .*--staff)\s*$")
    command = step.group(1)
    assert command.startswith(f"KODY_SITE_URL={url} .venv/bin/python manage.py"), command
    created = subprocess.run(
        ["bash", "-c", command + " --password-stdin"],
        cwd=ROOT,
        env=server.env,
        input=PASSWORD + "\n",
        capture_output=True,
        text=True,
        timeout=STEP_SECONDS,
    )
    if "Created staff user you <you@example.com>" not in created.stdout:
        server.fail(f"{command} --password-stdin said:\n{created.stdout}{created.stderr}")

    admin = browser.new_context().new_page()
    admin.set_default_timeout(STEP_SECONDS * 1000)
    admin.goto(f"{url}/admin/")
    admin.get_by_label("Username").fill("you")
    admin.get_by_label("Password").fill(PASSWORD)
    admin.get_by_role("button", name="Log in").click()
    expect(admin.get_by_role("link", name="Community reports", exact=True)).to_be_visible()
    expect(admin.get_by_text("have permission to view or edit anything")).to_have_count(0)

    page = browser.new_context().new_page()
    page.set_default_timeout(STEP_SECONDS * 1000)
    email = "reader@example.com"
    page.goto(f"{url}/signup")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Username").fill("reader")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your inbox")).to_be_visible()
    link = server.wait_for(r"(https?://\S+/verify\?token=[\w\-]+)").group(1)
    if not link.startswith(f"{url}/verify?token="):
        server.fail(f"the mailed link {link} is not on the port up serves ({url})")
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

    index = httpx2.get(f"{url}/api/v1/", headers={"Authorization": f"Bearer {raw}"}, timeout=30)
    if index.status_code != 200:
        server.fail(f"GET /api/v1/ answered {index.status_code}: {index.text}")
    assert index.json()["authenticated"] is True
    assert "whoami" in {c["name"] for c in index.json()["capabilities"]}

    async def whoami(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool("whoami", {})

    # Playwright's sync API keeps an event loop on this thread; the SDK client needs its own.
    with ThreadPoolExecutor(max_workers=1) as thread:
        result = thread.submit(with_session, url, raw, whoami).result(timeout=STEP_SECONDS)
    if result.is_error:
        server.fail(f"whoami over /mcp failed: {result.content}")
    assert result.structured_content["email"] == email
