"""The test clock: no test depends on the day it runs.

``--shift-clock`` runs the whole suite at another time (e.g. ``400d`` ahead, ticking), in
this process and in every subprocess the suite starts. The ``frozen_clock`` fixture pins
the wall clock for a test where the date itself matters.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_SHIFT = re.compile(r"^([+-]?\d+(?:\.\d+)?)([dhms])$")
SITECUSTOMIZE_DIR = Path(__file__).resolve().parent / "clockshift"

# A fixed instant for tests that freeze the clock: noon UTC, away from any day boundary.
FROZEN_AT = datetime(2031, 3, 14, 12, 0, tzinfo=UTC)


def parse_shift(text: str) -> float:
    """``"400d"`` → seconds; days, hours, minutes or seconds, signed."""
    match = _SHIFT.match(text.strip())
    if not match:
        raise ValueError(f"--shift-clock takes a number and a unit (d, h, m, s), not {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def start_shift(seconds: float):  # type: ignore[no-untyped-def]
    """Travel this process ``seconds`` ahead (ticking) and arrange the same for children."""
    import time_machine

    traveller = time_machine.travel(time.time() + seconds, tick=True)
    traveller.start()
    os.environ["KODY_TEST_CLOCK_OFFSET"] = repr(seconds)
    paths = [str(SITECUSTOMIZE_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    return traveller


def today_iso() -> str:
    """The current UTC day as the app sees it (shifted or frozen)."""
    return datetime.now(UTC).date().isoformat()


def days_ago(n: int) -> str:
    return (datetime.now(UTC).date() - timedelta(days=n)).isoformat()


class SteppedClock:
    """One clock for a test and the subprocesses it starts, stepped by the test.

    ``env()`` is what a child needs (``tests/clockshift/sitecustomize.py`` reads it); ``at``
    moves this process and every child to an instant, all ticking from there. Children follow
    within a poll (50 ms); step only while nothing waits on a deadline taken from the clock.
    """

    def __init__(self, path: Path, start: datetime) -> None:
        import time_machine

        self.path = path
        self.now = start
        self._write(start)
        self._traveller = time_machine.travel(start, tick=True)
        self._coordinates = self._traveller.start()

    def _write(self, at: datetime) -> None:
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(repr(at.timestamp()))
        scratch.replace(self.path)  # atomic: a child never reads half a number

    def env(self) -> dict[str, str]:
        paths = [str(SITECUSTOMIZE_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {
            "KODY_TEST_CLOCK_FILE": str(self.path),
            "KODY_TEST_CLOCK_OFFSET": "",  # this clock replaces a --shift-clock offset
            "PYTHONPATH": os.pathsep.join(paths),
        }

    def at(self, instant: datetime) -> None:
        self.now = instant
        self._write(instant)
        self._coordinates.move_to(instant)

    def stop(self) -> None:
        self._traveller.stop()
