"""Moves the wall clock of a test's child processes along with the test run.

``pytest --shift-clock=400d`` travels the test process a year ahead (time-machine, ticking)
and puts this folder on ``PYTHONPATH`` with ``KODY_TEST_CLOCK_OFFSET`` (seconds), so the
workers, servers and commands the suite starts as subprocesses live on the same clock.

A test that steps the clock of its subprocesses (``tests/clock.py``: ``SteppedClock``) puts
this folder on their ``PYTHONPATH`` with ``KODY_TEST_CLOCK_FILE``: each child travels to the
instant the file holds (epoch seconds, ticking from there) and a daemon thread moves it again
whenever the file changes, so beat, the workers and the test agree on the time. Threads do not
survive a fork: a child that forks (a prefork pool) must not rely on this in its children.
Nothing imports this outside such a run.
"""

import os

_offset = os.environ.get("KODY_TEST_CLOCK_OFFSET")
_file = os.environ.get("KODY_TEST_CLOCK_FILE")
if _offset:
    import time

    import time_machine

    time_machine.travel(time.time() + float(_offset), tick=True).start()
elif _file:
    import threading
    import time

    import time_machine

    def _read() -> str:
        try:
            with open(_file) as handle:
                return handle.read().strip()
        except OSError:
            return ""

    _seen = _read()
    _traveller = time_machine.travel(float(_seen), tick=True).start()

    def _follow() -> None:
        global _seen
        while True:
            time.sleep(0.05)  # not patched by time-machine: real sleep
            now = _read()
            if now and now != _seen:
                _seen = now
                _traveller.move_to(float(now))

    threading.Thread(target=_follow, name="kody-test-clock", daemon=True).start()
