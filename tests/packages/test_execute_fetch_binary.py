"""``fetch`` from sandboxed code carries bytes both ways: a Uint8Array, ArrayBuffer or Blob
body is sent byte for byte (no placeholder is filled in it), a binary response reads back
whole with ``arrayBuffer()``, and a body over the request bound is refused unsent.

A local HTTP server plays the outside world, reached as ``api.example.test``
(``KODY_EXECUTE_FETCH_ALLOW``), as in ``test_execute_fetch``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apps.packages.services import crypto, secrets
from apps.packages.services.execute import FETCH_MAX_BODY_BYTES
from kody.sandbox.pool import pool

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

HOST = "api.example.test"
VALUE = "sk-live-binary-SECRET-do-not-leak"
ALL_BYTES = bytes(range(256))


class Echo(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        Echo.seen.append({"body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
        self._send(body)

    def do_GET(self) -> None:  # noqa: N802
        Echo.seen.append({"body": b"", "headers": {}})
        self._send(ALL_BYTES * 4)

    def _send(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server(settings):
    settings.KODY_EXECUTE_FETCH_ALLOW = {HOST}
    Echo.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://{HOST}:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def fresh_keyring():
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


@pytest.mark.parametrize(
    "make",
    [
        "bytes",
        "bytes.buffer",
        "bytes.subarray(0)",
        "new DataView(bytes.buffer)",
        "new Blob([bytes], { type: 'application/octet-stream' })",
    ],
)
def test_a_binary_body_is_sent_byte_for_byte_and_echoed_back_whole(as_owner, server, make):
    code = f"""async () => {{
      const bytes = new Uint8Array(256).map((_, i) => i);
      const r = await fetch({json.dumps(server + "/echo")}, {{ method: "POST", body: {make} }});
      const back = new Uint8Array(await r.arrayBuffer());
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", back));
      const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
      return [r.status, back.length, hex];
    }}"""
    reply = as_owner.call("execute", code=code)
    assert Echo.seen[0]["body"] == ALL_BYTES
    assert reply["result"] == [200, 256, hashlib.sha256(ALL_BYTES).hexdigest()]


def test_a_binary_response_reads_back_with_array_buffer(as_owner, server):
    code = f"""async () => {{
      const r = await fetch({json.dumps(server + "/bytes")});
      const back = new Uint8Array(await r.arrayBuffer());
      return [back.length, back[0], back[255], back[256], back[1023]];
    }}"""
    assert as_owner.call("execute", code=code)["result"] == [1024, 0, 255, 0, 255]


def test_a_placeholder_in_a_binary_body_is_sent_as_written(as_owner, owner, server):
    secrets.set_many(
        owner.stable_user_id, [secrets.NewSecret("API_KEY", VALUE, allowed_hosts=[HOST])]
    )
    code = f"""async () => {{
      const body = new TextEncoder().encode("key={{{{secret:API_KEY}}}}");
      const r = await fetch({json.dumps(server + "/echo")}, {{
        method: "POST", body, headers: {{ authorization: "Bearer {{{{secret:API_KEY}}}}" }},
      }});
      return new TextDecoder().decode(await r.arrayBuffer());
    }}"""
    reply = as_owner.call("execute", code=code)
    # The header (text) is filled for the allowed host; the bytes are not touched.
    assert Echo.seen[0]["headers"]["authorization"] == f"Bearer {VALUE}"
    assert Echo.seen[0]["body"] == b"key={{secret:API_KEY}}"
    assert reply["result"] == "key={{secret:API_KEY}}"
    assert VALUE not in json.dumps(reply)


def test_a_body_over_the_bound_is_refused_unsent(as_owner, server):
    code = f"""async () => {{
      const body = new Uint8Array({FETCH_MAX_BODY_BYTES + 1});
      await fetch({json.dumps(server + "/echo")}, {{ method: "POST", body }});
    }}"""
    error = as_owner.error("execute", 422, code=code)
    assert error["code"] == "fetch_refused"
    assert error["details"]["maxBytes"] == FETCH_MAX_BODY_BYTES
    assert Echo.seen == []
    assert as_owner.call("execute", code="async () => 'ok'")["result"] == "ok"
    assert pool().healthy() >= 1
