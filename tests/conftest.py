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


@pytest.fixture(autouse=True)
def _committed_user_schemas_dropped(request: pytest.FixtureRequest) -> Iterator[None]:
    """A transactional test commits per-user schemas, and the cast's stable ids repeat from test
    to test: after the flush, drop those schemas and forget the process's schema cache, so the
    next test meets neither a stale schema nor a cache entry whose registry row is gone."""
    yield
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or bool(
        marker and marker.kwargs.get("transaction")
    )
    if not transactional:
        return
    from django.db import connection

    from kody.userschema.naming import like_pattern
    from kody.userschema.schemas import known

    blocker = request.getfixturevalue("django_db_blocker")
    with blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [like_pattern()])
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    known.clear()
