"""Headless Debian Chromium driven by Playwright against pytest-django's live server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("KODY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


# Module scope: the async-unsafe switch below is undone as soon as the browser tests finish.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test does it)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; Django refuses ORM calls while
    # a loop exists unless told otherwise. The live server itself runs in its own thread.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def site(live_server: Any, settings: Any, transactional_db: None) -> Iterator[str]:
    # Mailed links must point at the live server, not the development default.
    settings.SITE_URL = live_server.url
    settings.KODY_ACTORS_INLINE = True  # usage reads the UserMeter actor without a worker
    yield str(live_server.url)
    # The database flush after a transactional test empties tables, not per-user schemas.
    from apps.accounts.models import User
    from kody.userschema.schemas import purge_schema

    for stable_user_id in User.objects.values_list("stable_user_id", flat=True):
        purge_schema(stable_user_id)


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
