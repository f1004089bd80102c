"""Static files served by the ASGI process (uvicorn under ``manage.py up``) stream with an
async iterator: no "StreamingHttpResponse must consume synchronous iterators" warning, which
Django raises for every sync file response it has to buffer under ASGI."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler


async def _get(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    communicator = ApplicationCommunicator(ASGIHandler(), scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(10)
    body = b""
    while True:
        message = await communicator.receive_output(10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(10)
    return start["status"], dict(start["headers"]), body


def test_a_static_file_streams_without_the_sync_iterator_warning(settings: Any) -> None:
    settings.SERVESTATIC_USE_FINDERS = True  # read by the middleware when the handler is built
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, headers, body = asyncio.run(_get("/static/kody.css"))

    assert status == 200
    assert headers[b"Content-Type"].startswith(b"text/css"), headers
    assert body == (settings.BASE_DIR / "static" / "kody.css").read_bytes()
    assert [str(w.message) for w in caught if "synchronous iterators" in str(w.message)] == []
