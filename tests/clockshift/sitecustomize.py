"""Moves the wall clock of a test's child processes along with the test run.

``pytest --shift-clock=400d`` travels the test process a year ahead (time-machine, ticking)
and puts this folder on ``PYTHONPATH`` with ``KODY_TEST_CLOCK_OFFSET`` (seconds), so the
workers, servers and commands the suite starts as subprocesses live on the same clock.
Nothing imports this outside such a run.
"""

import os

_offset = os.environ.get("KODY_TEST_CLOCK_OFFSET")
if _offset:
    import time

    import time_machine

    time_machine.travel(time.time() + float(_offset), tick=True).start()
