"""``fetch`` from sandboxed code goes through the host: internal addresses are refused after
DNS and on every redirect, secrets are filled only for their allowed hosts and never come
back, and every fetch is charged.

A local HTTP server plays the outside world. Tests that need to reach it map the made-up name
``api.example.test`` to it (``KODY_EXECUTE_FETCH_ALLOW``); every other name and address —
including the redirect hops — goes through the real check.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apps.entitlements.actor import UserMeter
from apps.entitlements.services.enforcement import utc_day
from apps.packages.services import crypto, secrets
from kody.sandbox.pool import pool

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

VALUE = "sk-live-Zq8v3-SECRET-VALUE-do-not-leak"
HOST = "api.example.test"


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        Recorder.seen.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        )
        if self.path.startswith("/redirect-to-loopback"):
            port = self.server.server_address[1]
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{port}/inside")
            self.end_headers()
            return
        echo = json.dumps({"auth": self.headers.get("authorization"), "body": body}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(echo)))
        self.end_headers()
        self.wfile.write(echo)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    Recorder.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def reachable(settings):
    settings.KODY_EXECUTE_FETCH_ALLOW = {HOST}


@pytest.fixture(autouse=True)
def fresh_keyring():
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


def fetched(owner_id: str) -> int:
    row = UserMeter.call(owner_id, "read", resource="outbound_fetches_per_day", day=utc_day())
    return int(row["count"])


def fetch_code(url: str, headers: dict | None = None) -> str:
    return (
        f"async () => {{ const r = await fetch({json.dumps(url)}, "
        f"{{headers: {json.dumps(headers or {})}}}); return [r.status, await r.text()] }}"
    )


def test_a_public_fetch_answers_the_response_and_is_charged(as_owner, owner, server, reachable):
    before = fetched(owner.stable_user_id)
    reply = as_owner.call("execute", code=fetch_code(f"http://{HOST}:{server}/hello"))
    assert reply["result"][0] == 200 and json.loads(reply["result"][1])["auth"] is None
    assert [s["path"] for s in Recorder.seen] == ["/hello"]
    assert fetched(owner.stable_user_id) == before + 1


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/inside",
        "http://10.0.0.1:{port}/inside",
        "http://10.255.3.4/",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost:{port}/inside",  # a name that resolves to loopback
        "http://[::1]:{port}/inside",
        "file:///etc/passwd",
    ],
)
def test_internal_addresses_are_refused_and_nothing_is_sent(as_owner, server, url):
    error = as_owner.error("execute", 422, code=fetch_code(url.format(port=server)))
    assert error["code"] == "fetch_refused"
    assert Recorder.seen == []
    assert as_owner.call("execute", code="async () => 'ok'")["result"] == "ok"
    assert pool().healthy() >= 1


def test_a_redirect_to_loopback_is_refused_on_the_hop(as_owner, server, reachable):
    error = as_owner.error(
        "execute", 422, code=fetch_code(f"http://{HOST}:{server}/redirect-to-loopback")
    )
    assert error["code"] == "fetch_refused"
    assert [s["path"] for s in Recorder.seen] == ["/redirect-to-loopback"]  # never /inside


def test_a_secret_is_filled_for_its_allowed_host_and_scrubbed_from_the_answer(
    as_owner, owner, server, reachable
):
    secrets.set_many(
        owner.stable_user_id, [secrets.NewSecret("API_KEY", VALUE, allowed_hosts=[HOST])]
    )
    code = fetch_code(f"http://{HOST}:{server}/a", {"Authorization": "Bearer {{secret:API_KEY}}"})
    reply = as_owner.call("execute", code=code)
    assert Recorder.seen[0]["headers"]["authorization"] == f"Bearer {VALUE}"
    assert json.loads(reply["result"][1])["auth"] == "Bearer [secret]"
    assert VALUE not in json.dumps(reply)


def test_a_placeholder_for_a_host_outside_allowed_hosts_is_refused_unsent(
    as_owner, owner, server, reachable
):
    secrets.set_many(
        owner.stable_user_id,
        [secrets.NewSecret("API_KEY", VALUE, allowed_hosts=["api.stripe.com"])],
    )
    code = fetch_code(f"http://{HOST}:{server}/a", {"Authorization": "Bearer {{secret:API_KEY}}"})
    error = as_owner.error("execute", 422, code=code)
    assert error["code"] == "fetch_refused" and error["details"]["secret"] == "API_KEY"
    assert Recorder.seen == []
    assert VALUE not in json.dumps(error)


def test_another_users_secret_is_never_filled(as_outsider, owner, server, reachable):
    secrets.set_many(
        owner.stable_user_id, [secrets.NewSecret("API_KEY", VALUE, allowed_hosts=[HOST])]
    )
    code = fetch_code(f"http://{HOST}:{server}/a", {"Authorization": "{{secret:API_KEY}}"})
    error = as_outsider.error("execute", 422, code=code)
    assert error["code"] == "fetch_refused" and Recorder.seen == []


def test_a_caught_refusal_lets_the_code_carry_on(as_owner):
    code = """async () => {
      try { await fetch('http://169.254.169.254/') } catch (e) { return e.code }
    }"""
    assert as_owner.call("execute", code=code)["result"] == "fetch_refused"
