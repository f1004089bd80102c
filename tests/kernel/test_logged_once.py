"""A refused request is one line in the log (the web server's access line), and a server error
is still reported, once."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client


@pytest.fixture
def console(settings: Any) -> Iterator[io.StringIO]:
    """Everything the configured console handlers would print, as one stream."""
    settings.DEBUG = True  # Django's own console handler speaks only under DEBUG
    out = io.StringIO()
    handlers = {
        handler
        for name in ("django.request", "django", "")
        for handler in logging.getLogger(name).handlers
        if type(handler) is logging.StreamHandler
    }
    saved = {handler: handler.setStream(out) for handler in handlers}
    yield out
    for handler, stream in saved.items():
        handler.setStream(stream)


@pytest.mark.django_db
def test_a_404_is_not_logged_again_by_django(client: Client, console: io.StringIO) -> None:
    response = client.get("/no-such-page-anywhere")
    assert response.status_code == 404
    assert "no-such-page-anywhere" not in console.getvalue()


def test_a_server_error_is_logged_exactly_once(console: io.StringIO) -> None:
    logging.getLogger("django.request").error(
        "Internal Server Error: /boom", extra={"status_code": 500}
    )
    assert console.getvalue().count("Internal Server Error: /boom") == 1
