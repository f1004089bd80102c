"""``execute`` through the API beside ``whoami`` through the same API, in the same run (issue 37).

Starts uvicorn on ``config.asgi`` against the benchmark database, makes one user and a token,
then measures over keep-alive HTTP connections:

* cold: the first ``execute`` after the server started (the pool is empty then);
* p50/p99 of ``GET /api/v1/whoami``, of ``execute`` returning a constant, and of ``execute``
  calling ``kody.valueGet`` (``--samples`` each, interleaved so load drifts hit all three);
* calls/s and errors with ``--callers`` (16) concurrent callers of the constant ``execute``.

Target: warm ``execute`` p50 <= ``whoami`` p50 + 15 ms, and no error at 16 callers.

    .venv/bin/python benchmarks/execute.py [--samples 200] [--callers 16] [--concurrent-calls 320]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _harness import ROOT, database_url, pct, setup_django

CONSTANT = "async () => 42"
VALUE_GET = "async () => (await kody.valueGet({name: 'bench'})).value.value"


def start_server(port: int, log: Path) -> subprocess.Popen:
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_ACTORS_INLINE": "1",
        "KODY_SECURE_SSL_REDIRECT": "0",
    }
    env.pop("KODY_TEST_DB_SUFFIX", None)
    command = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host",
               "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"uvicorn did not come up:\n{log.read_text()}")


class Caller:
    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, float]:
        started = time.perf_counter()
        payload = json.dumps(body) if body is not None else None
        self.conn.request(method, path, body=payload, headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - started

    def whoami(self) -> tuple[int, float]:
        return self.request("GET", "/api/v1/whoami")

    def execute(self, code: str) -> tuple[int, float]:
        return self.request("POST", "/api/v1/capabilities/execute", {"code": code})


def concurrent(port: int, token: str, callers: int, calls: int) -> tuple[float, int]:
    """(calls per second, errors) for ``calls`` executes spread over ``callers`` threads."""
    errors = [0] * callers
    start = threading.Barrier(callers + 1)

    def run(index: int) -> None:
        caller = Caller(port, token)
        start.wait()
        for _ in range(calls // callers):
            try:
                status, _ = caller.execute(CONSTANT)
            except (OSError, http.client.HTTPException):
                status = 0
            if status != 200:
                errors[index] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    return (calls // callers) * callers / elapsed, sum(errors)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--concurrent-calls", type=int, default=320)
    parser.add_argument("--port", type=int, default=18737)
    args = parser.parse_args()
    # The server runs actors inline; so does this process's own setup (the meter's charge for
    # the seeded value), rather than waiting on shard workers nobody started.
    os.environ["KODY_ACTORS_INLINE"] = "1"
    setup_django()
    from _accounts import live_account_ids

    from apps.accounts.models import User
    from apps.accounts.services.tokens import create_token
    from apps.entitlements.plans import Plan
    from apps.entitlements.services import invalidate_plan
    from apps.packages.services import values

    [uid] = live_account_ids(1)
    user = User.objects.get(stable_user_id=uid)
    # The free plan's 250 execute calls a day would end the run: bench on the largest plan.
    User.objects.filter(pk=user.pk).update(plan=Plan.MAX)
    invalidate_plan(uid)
    _, token = create_token(user, "bench", enforce_rate_limit=False)
    values.set_value(uid, name="bench", value="v", description="", scope="user", binding_key=None)

    log = Path(tempfile.mkdtemp(prefix="kody-bench-")) / "uvicorn.log"
    server = start_server(args.port, log)
    try:
        caller = Caller(args.port, token)
        status, cold = caller.execute(CONSTANT)
        if status != 200:
            raise SystemExit(f"execute answered {status}; see {log}")
        samples: dict[str, list[float]] = {"whoami": [], "execute": [], "execute+valueGet": []}
        for _ in range(args.samples):
            for name, call in (
                ("whoami", caller.whoami),
                ("execute", lambda: caller.execute(CONSTANT)),
                ("execute+valueGet", lambda: caller.execute(VALUE_GET)),
            ):
                status, seconds = call()
                if status != 200:
                    raise SystemExit(f"{name} answered {status}; see {log}")
                samples[name].append(seconds)
        rate, errors = concurrent(args.port, token, args.callers, args.concurrent_calls)
    finally:
        server.terminate()
        server.wait(timeout=30)

    load = os.getloadavg()[0]
    print(f"execute benchmark, {args.samples} samples each, load average {load:.2f}")
    print(f"  cold execute (first call)        {cold * 1000:8.1f} ms")
    for name, values_s in samples.items():
        p50, p99 = pct(values_s, 0.50) * 1000, pct(values_s, 0.99) * 1000
        print(f"  {name:32} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms")
    gap = (pct(samples["execute"], 0.5) - pct(samples["whoami"], 0.5)) * 1000
    verdict = "met" if gap <= 15 else "MISSED"
    print(f"  execute p50 - whoami p50         {gap:8.1f} ms   target <= 15 ms {verdict}")
    outcome = "met" if errors == 0 else "MISSED"
    print(
        f"  {args.callers} concurrent callers            {rate:8.1f} calls/s, "
        f"{errors} errors   target 0 errors {outcome}"
    )


if __name__ == "__main__":
    main()
