"""Per-schema prepared statements on and off (ADR 0038), in ONE process, blocks in turns.

    python benchmarks/prepared_ab.py [--blocks 12] [--calls 300] [--users 8]

``KODY_ACTOR_PREPARED_MAX`` is read per batch, so one process can switch it between blocks:
block after block, ``off`` (0) and ``on`` (the default) run the same calls, and each mode's
numbers are the medians over its blocks. Two paths: an inline ``UserMeter.call`` (one
caller, the ``inline`` row of ``actors.py``) and a shard batch of one ``consume`` for each
of ``--users`` users run by ``kody.actors.runtime.execute`` as a shard worker runs it. For
each: wall time and the calling thread's CPU per call, and the Postgres backend's CPU per
call (read from ``/proc``: the server must run on this host, as the embedded one does).
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _accounts import live_account_ids
from _harness import cpu_seconds, setup_django
from actors import DAY, LIMIT


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--users", type=int, default=8)
    options = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django.db import connection

    from apps.entitlements.actor import UserMeter
    from kody.actors.dispatch import _build, new_key
    from kody.actors.runtime import execute
    from kody.actors.wire import Call

    settings.KODY_ACTORS_INLINE = True
    on = settings.KODY_ACTOR_PREPARED_MAX or 128
    one, *many = live_account_ids(options.users + 1)
    for user in [one, *many]:
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT)
    kwargs = {"resource": "execute_calls_per_day", "day": DAY, "limit": LIMIT}

    def inline() -> int:
        for _ in range(options.calls):
            UserMeter.call(one, "consume", **kwargs)
        return options.calls

    def batch() -> int:
        batches = max(1, options.calls // len(many))
        for _ in range(batches):
            built = [
                _build(UserMeter, user, "consume", (), kwargs, new_key(), True) for user in many
            ]
            calls = [Call.decode(call.encode()) for call in built]  # as a shard worker gets them
            execute(calls)
        return batches * len(many)

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    print(
        f"Prepared statements off/on ({options.blocks} blocks of each in turns, "
        f"{options.calls} calls a block, batch of {len(many)} users, {os.cpu_count()} CPUs, "
        f"load {', '.join(f'{x:.2f}' for x in os.getloadavg())})\n"
    )
    for label, run in (("inline UserMeter.call", inline), (f"{len(many)}-user batch", batch)):
        seen: dict[str, list[tuple[float, float, float]]] = {"off": [], "on": []}
        for mode in ("off", "on"):  # warm both: schemas seen, statements prepared
            settings.KODY_ACTOR_PREPARED_MAX = 0 if mode == "off" else on
            run()
        for _ in range(options.blocks):
            for mode in ("off", "on"):
                settings.KODY_ACTOR_PREPARED_MAX = 0 if mode == "off" else on
                wall, cpu, server = time.perf_counter(), time.thread_time(), cpu_seconds(pid)
                calls = run()
                seen[mode].append(
                    (
                        (time.perf_counter() - wall) / calls * 1000,
                        (time.thread_time() - cpu) / calls * 1000,
                        (cpu_seconds(pid) - server) / calls * 1000,
                    )
                )
        medians = {
            mode: [statistics.median(row[i] for row in rows) for i in range(3)]
            for mode, rows in seen.items()
        }
        print(label)
        for mode, (wall, cpu, server) in medians.items():
            print(
                f"  {mode:3}  wall {wall:6.3f} ms/call   client CPU {cpu:6.3f}   "
                f"backend CPU {server:6.3f}"
            )
        off, on_ = medians["off"], medians["on"]
        print(
            f"  on/off  wall {on_[0] / off[0]:5.2f}x   client CPU {on_[1] / off[1]:5.2f}x   "
            f"backend CPU {on_[2] / off[2]:5.2f}x\n"
        )
    settings.KODY_ACTOR_PREPARED_MAX = on


if __name__ == "__main__":
    main()
