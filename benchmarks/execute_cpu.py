"""The runtime alone: ``execute()`` of one user's batch, in process, no queue and no worker.

    python benchmarks/execute_cpu.py [--calls 1] [--users 1] [--batches 400] [--rounds 5]
                                     [--inline]

Runs ``UserMeter.consume`` batches of ``--calls`` calls spread over ``--users`` users through
``kody.actors.runtime.execute`` exactly as a shard worker hands them over (decoded off the
wire, not fresh), and prints the median over ``--rounds`` of the calling thread's CPU time
and wall time per call, and the queries a batch sends. Less noisy than the queue rows on a
shared host: no other process of ours runs. ``--inline``: each batch is ``--calls`` inline
``UserMeter.call``s instead (``KODY_ACTORS_INLINE``, the path the inline row of ``actors.py``
measures: dispatch, a fresh call, the reply decoded). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _accounts import live_account_ids
from _harness import setup_django
from actors import DAY, LIMIT


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--users", type=int, default=1)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inline", action="store_true")
    options = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django.db import connection

    from apps.entitlements.actor import UserMeter
    from kody.actors import runtime
    from kody.actors.dispatch import _build, new_key
    from kody.actors.runtime import execute
    from kody.actors.wire import Call
    from kody.userschema import scope
    from kody.userschema.schemas import ensure_schema

    users = live_account_ids(options.users)
    for user in users:
        ensure_schema(user)
    charge = {"resource": "execute_calls_per_day", "day": DAY, "limit": LIMIT}

    def batch() -> list[Call]:
        return [
            Call.decode(
                _build(
                    UserMeter, users[i % len(users)], "consume", (), charge, new_key(), True
                ).encode()
            )
            for i in range(options.calls)
        ]

    def run() -> None:
        if not options.inline:
            execute(batch())
            return
        for i in range(options.calls):
            UserMeter.call(users[i % len(users)], "consume", **charge)

    settings.KODY_ACTORS_INLINE = options.inline

    for _ in range(50):
        run()
    sent = [0]

    def count(execute_, sql, params, many, context):  # type: ignore[no-untyped-def]
        sent[0] += 1
        return execute_(sql, params, many, context)

    in_one_query = scope.in_one_query

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        sent[0] += 1
        return in_one_query(*args, **kwargs)

    scope.in_one_query = runtime.in_one_query = counted
    with connection.execute_wrapper(count):
        run()
    scope.in_one_query = runtime.in_one_query = in_one_query
    cpu, wall = [], []
    for _ in range(options.rounds):
        calls = options.batches * options.calls
        started_cpu, started = time.thread_time(), time.perf_counter()
        for _ in range(options.batches):
            run()
        cpu.append((time.thread_time() - started_cpu) / calls * 1000)
        wall.append((time.perf_counter() - started) / calls * 1000)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{'inline call()' if options.inline else 'execute()'}: {options.calls} call(s) a batch"
        f" over {options.users} user(s): "
        f"{sent[0]} queries a batch, CPU {statistics.median(cpu):.3f} ms/call, "
        f"wall {statistics.median(wall):.3f} ms/call (median of {options.rounds}; load {load})"
    )


if __name__ == "__main__":
    main()
