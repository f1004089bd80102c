"""Suite-wide options: ``--shift-clock`` and the ``frozen_clock`` fixture (see tests/clock.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.clock import FROZEN_AT, parse_shift, start_shift


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
