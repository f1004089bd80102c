"""Suite-wide: ``--shift-clock``, the ``frozen_clock`` fixture (see tests/clock.py), the shared
cast of users (tests/cast.py) and the database-refusal helpers (tests/constraints.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.clock import FROZEN_AT, parse_shift, start_shift
from tests.constraints import raw_sql, refuses

pytest_plugins = ["tests.cast"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shift-clock",
        default=None,
        metavar="OFFSET",
        help="run the suite with the wall clock moved by OFFSET (e.g. 400d, -3h), ticking, "
        "in this process and every subprocess it starts",
    )


def pytest_configure(config: pytest.Config) -> None:
    shift = config.getoption("--shift-clock")
    if shift:
        try:
            seconds = parse_shift(shift)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from exc
        config._kody_clock = start_shift(seconds)  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    traveller = getattr(config, "_kody_clock", None)
    if traveller is not None:
        traveller.stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    shift = config.getoption("--shift-clock")
    return f"clock shifted by {shift} (ticking)" if shift else None


@pytest.fixture
def frozen_clock() -> Iterator[object]:
    """Pin the wall clock at ``FROZEN_AT`` for one test; ``.move_to()`` / ``.shift()`` move it."""
    import time_machine

    with time_machine.travel(FROZEN_AT, tick=False) as traveller:
        yield traveller


@pytest.fixture
def refused() -> Callable[[Callable[[], Any]], None]:
    """``refused(lambda: make(...))``: the database itself rejects the row."""
    return refuses


@pytest.fixture
def sql() -> Callable[..., int]:
    return raw_sql


# Rows the data migrations seed, which every flush of a transactional test takes away (pytest-django
# runs those tests after the others, so only they can meet an empty table). The operators group
# is left out: its migration rebuilds permissions through the app registry.
SEEDS = (
    ("apps.accounts.migrations.0009_seed_product_flags", "seed_flags"),
    ("apps.entitlements.migrations.0002_storage_reconcile_cursor_row", "create_cursor"),
    ("apps.jobs.migrations.0002_wake_alarms_periodic_task", "create_wake"),
    ("apps.mailbox.migrations.0002_database_foreign_keys_and_marker", "create_marker"),
    ("apps.system_email.migrations.0002_database_foreign_keys_and_marker", "create_marker"),
    ("kody.migrations.0008_lane_dispatcher_periodic_task", "create_dispatcher"),
)


@pytest.fixture(autouse=True)
def _no_plan_remembered_from_another_test() -> Iterator[None]:
    """The process's copies of plans (``plan_cache.LOCAL_SECONDS``) would outlive a test's
    rolled-back users, and the cast's stable ids repeat from test to test."""
    from apps.entitlements.services.plan_cache import forget_local

    forget_local()
    yield
    forget_local()


@pytest.fixture(autouse=True)
def _no_usage_events_buffered_by_another_test(request: pytest.FixtureRequest) -> None:
    """The usage buffer lives in Redis, outside the test's transaction, and the cast's stable
    ids repeat: a test meets only the events it buffered itself."""
    if request.node.get_closest_marker("django_db") is None and "db" not in request.fixturenames:
        return
    from django_redis import get_redis_connection

    from apps.entitlements.services.usage import KEY_TAG

    client = get_redis_connection("default")
    # The buffer, the drainers' ledger and any processing list a drain left behind.
    stale = list(client.scan_iter(match=f"{KEY_TAG}:*", count=1000))
    if stale:
        client.delete(*stale)


def _transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    return "transactional_db" in request.fixturenames or bool(
        marker and marker.kwargs.get("transaction")
    )


@pytest.fixture(autouse=True)
def _committed_user_schemas_dropped(request: pytest.FixtureRequest) -> Iterator[None]:
    """A transactional test commits per-user schemas, and the cast's stable ids repeat from test
    to test: afterwards, drop those schemas and forget the process's schema cache, so the next
    test meets neither a stale schema nor a cache entry whose registry row the flush took. Before
    one, put back the rows the migrations seed (an earlier flush removed them)."""
    if not _transactional(request):
        yield
        return
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    from tests.schemas import drop_user_schemas

    blocker = request.getfixturevalue("django_db_blocker")
    with blocker.unblock():
        for module, function in SEEDS:
            try:
                getattr(importlib.import_module(module), function)(
                    apps, SimpleNamespace(connection=connection)
                )
            except LookupError:
                continue  # a test limited to some apps (available_apps) has no such table
    yield
    with blocker.unblock():
        drop_user_schemas()
