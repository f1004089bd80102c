"""OAuth for /mcp: the token endpoint's refresh rate, and a tool call with an OAuth token beside
the same call with a personal access token, in one run.

    python benchmarks/oauth.py [--seconds 5] [--rounds 3]

Starts uvicorn on ``config.asgi`` against the benchmark database (``test_kody_bench``), with
actor calls inline, as deployed (``KODY_DEBUG=0``; requests carry ``X-Forwarded-Proto: https``
as they would behind the TLS proxy). One person gets a personal access token and, through the
real consent page (Django's test client, signed in) and the real token endpoint, an OAuth token
pair for a dynamically registered client.

Rows (closed loop, one caller):

* ``token endpoint refresh``: ``POST /oauth/token`` with ``grant_type=refresh_token``, each
  request presenting the refresh token the previous one returned (rotation, the family, the
  ``access_tokens`` row);
* ``/mcp tools/call whoami, PAT`` and ``…, OAuth``: one JSON-RPC ``tools/call`` per request
  (stateless, no initialize), taken in alternating rounds so both see the same machine.

Prints the rows, then the ratio of the OAuth call's p50 to the PAT call's (target <= 1.2) as a
verdict line. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from urllib.parse import parse_qs, urlencode, urlsplit

from _harness import ROOT, database_url, row, setup_django, summary
from actors import verdict

TARGET = 1.2  # issue 39: OAuth tools/call p50 at most 1.2x the PAT's
PROXY = {"X-Forwarded-Proto": "https"}
REDIRECT_URI = "http://127.0.0.1:53682/callback"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(url: str, port: int) -> subprocess.Popen:
    import httpx2
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_SITE_URL": url,
        "KODY_ACTORS_INLINE": "1",
    }
    command = [
        sys.executable, "-m", "uvicorn", "config.asgi:application",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx2.get(url + "/healthz", headers=PROXY, timeout=2).status_code == 200:
                return proc
        except httpx2.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("uvicorn did not come up")


def oauth_pair(url: str, user: object) -> tuple[str, dict[str, str]]:
    """Register a client, consent as ``user``, exchange the code: (client_id, tokens)."""
    import httpx2
    from django.test import Client

    registered = httpx2.post(
        url + "/oauth/register",
        headers=PROXY,
        json={
            "client_name": "Benchmark Agent",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
    ).json()
    client_id = registered["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "state": "bench",
            "resource": url + "/mcp",
        }
    )
    from django.conf import settings
    from django.test import override_settings

    # The consent page links static files; this process has no collected manifest.
    plain = "django.contrib.staticfiles.storage.StaticFilesStorage"
    storages = {**settings.STORAGES, "staticfiles": {"BACKEND": plain}}
    browser = Client(secure=True, headers={"host": urlsplit(url).netloc, **PROXY})
    browser.force_login(user)
    with override_settings(STORAGES=storages):
        page = browser.get("/oauth/authorize?" + query)
    fields = re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.content.decode()
    )
    form = {name: html.unescape(value) for name, value in fields}
    with override_settings(STORAGES=storages):
        answer = browser.post("/oauth/authorize?" + query, {**form, "allow": "on"})
    location = answer.get("Location", "")
    if "code=" not in location:
        raise SystemExit(f"consent did not give a code: {answer.status_code} {location}")
    code = parse_qs(urlsplit(location).query)["code"][0]
    tokens = httpx2.post(
        url + "/oauth/token",
        headers=PROXY,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": url + "/mcp",
        },
    ).json()
    return client_id, tokens


def closed_loop(call: Callable[[], None], seconds: float) -> dict[str, float]:
    samples: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        begin = time.perf_counter()
        call()
        samples.append(time.perf_counter() - begin)
    return summary(samples, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    os.environ["KODY_SITE_URL"] = url
    setup_django()
    import httpx2

    from apps.accounts.models import User
    from apps.accounts.services.tokens import create_token

    print(f"load average {os.getloadavg()[0]:.2f}")
    suffix = secrets.token_hex(4)
    user = User.objects.create_user(
        username=f"bench-oauth-{suffix}", email=f"bench-oauth-{suffix}@example.test"
    )
    _, pat = create_token(user, "benchmark", enforce_rate_limit=False)
    proc = start_server(url, port)
    try:
        client_id, tokens = oauth_pair(url, user)
        http = httpx2.Client(timeout=30)
        latest = {"refresh": tokens["refresh_token"]}

        def refresh() -> None:
            answer = http.post(
                url + "/oauth/token",
                headers=PROXY,
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": latest["refresh"],
                    "client_id": client_id,
                },
            )
            assert answer.status_code == 200, answer.text
            latest["refresh"] = answer.json()["refresh_token"]
            latest["access"] = answer.json()["access_token"]

        def tool_call(raw: str) -> Callable[[], None]:
            headers = {
                "Authorization": f"Bearer {raw}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            }
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}},
            }

            def call() -> None:
                answer = http.post(url + "/mcp", json=body, headers=headers)
                assert answer.status_code == 200, answer.text

            return call

        stats = closed_loop(refresh, args.seconds)
        print(row("token endpoint refresh", stats))
        oauth_token = latest["access"]
        pat_p50: list[float] = []
        oauth_p50: list[float] = []
        for _ in range(args.rounds):
            for label, raw, into in (("PAT", pat, pat_p50), ("OAuth", oauth_token, oauth_p50)):
                result = closed_loop(tool_call(raw), args.seconds)
                into.append(result["p50_ms"])
                print(row(f"/mcp tools/call whoami, {label}", result))
        ratio = sorted(oauth_p50)[len(oauth_p50) // 2] / sorted(pat_p50)[len(pat_p50) // 2]
        print(verdict("OAuth tools/call p50 / PAT", ratio, TARGET, True, "{:.2f}x"))
        print(verdict("token endpoint refreshes/s", stats["per_s"], None, False, "{:.0f}"))
    finally:
        proc.terminate()
        proc.wait(timeout=15)


if __name__ == "__main__":
    main()
