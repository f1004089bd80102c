"""Run callables at the same moment, each in its own thread with its own database connection:
the harness of the tests that prove something happens once under concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


def in_threads(*targets: Callable[[], object], together: bool = False) -> list[object]:
    """Run each target in its own thread; their results or the exceptions they raised, in
    order. ``together`` holds every thread at a barrier until all have started, so the
    targets race rather than run one after another."""
    results: list[object] = [None] * len(targets)
    start = threading.Barrier(len(targets)) if together else None

    def runner(index: int) -> None:
        try:
            if start is not None:
                start.wait()
            results[index] = targets[index]()
        except Exception as exc:  # noqa: BLE001 - the test reads what each run ended with
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(len(targets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results
