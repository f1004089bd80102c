"""Shard-worker code and process counts compared interleaved, against the same callers.

    python benchmarks/worker_ab.py --config before=/path/to/old/checkout:1 \\
        --config after=.:1 --config after2=.:2 [--rounds 2] [--seconds 3]

Each ``NAME=CHECKOUT:PROCESSES`` starts the shard workers from that checkout (same virtualenv,
same database and Redis) spread over PROCESSES solo workers, then times three closed loops:
one caller on one user, 64 callers over 64 users (4 processes), and the mixed workload of
``actors.py`` (each caller alternates a meter charge and a RunLog write). The configurations
take turns, round after round, so load from elsewhere on the machine hits them alike; compare
within a round. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _accounts import live_account_ids
from _harness import clear_actor_keys, database_url, setup_django
from actors import closed_loop, closed_loop_procs, meter_call, mixed_call


def start(checkout: Path, processes: int) -> list[subprocess.Popen]:
    from django.conf import settings

    from kody.actors import transport
    from kody.actors.topology import shard_groups

    clear_actor_keys()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_ACTOR_SHARDS": str(settings.KODY_ACTOR_SHARDS),
        "KODY_ACTOR_LEASE_SECONDS": "2",
        "PYTHONWARNINGS": "ignore",
    }
    procs = []
    for index, group in enumerate(shard_groups(settings.KODY_ACTOR_SHARDS, processes)):
        queues = ",".join(transport.queue_name(shard) for shard in group)
        argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-n", f"ab{index}@%h"]
        argv += ["-Q", queues, "-P", "solo", "-c", "1", "-l", "ERROR", "--without-mingle"]
        argv += ["--without-gossip", "--without-heartbeat"]
        procs.append(
            subprocess.Popen(
                argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
    client = transport.client()
    deadline = time.monotonic() + 60
    while not all(client.exists(transport.lease_key(n)) for n in range(settings.KODY_ACTOR_SHARDS)):
        if time.monotonic() > deadline:
            raise RuntimeError("shard workers did not start")
        time.sleep(0.05)
    return procs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", action="append", required=True, help="NAME=CHECKOUT:PROCS")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    options = parser.parse_args()
    configs = []
    for text in options.config:
        name, _, rest = text.partition("=")
        checkout, _, procs = rest.rpartition(":")
        configs.append((name, Path(checkout).resolve(), int(procs)))
    setup_django()
    from django.conf import settings
    from django.db import connections

    users = live_account_ids(64)
    settings.KODY_ACTORS_INLINE = True
    warm = mixed_call(users)
    for index in range(len(users) * 2):  # schemas, meters and RunLog tables, inline
        warm(index % len(users))
    settings.KODY_ACTORS_INLINE = False
    connections.close_all()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Shard-worker A/B ({options.seconds:g}s per loop, load average {load})", flush=True)
    for number in range(options.rounds):
        for name, checkout, processes in configs:
            procs = start(checkout, processes)
            try:
                meter_call(users)(0)
                connections.close_all()
                one = closed_loop(meter_call(users[:1]), 1, options.seconds)
                many = closed_loop_procs(lambda: meter_call(users), 4, 16, options.seconds)
                mixed = closed_loop_procs(lambda: mixed_call(users), 4, 16, options.seconds)
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    proc.wait(timeout=60)
            print(
                f"round {number} {name:>8} ({processes} proc): 1 caller p50 {one['p50_ms']:6.2f} ms"
                f" | 64 users {many['per_s']:5.0f}/s | mixed {mixed['per_s']:5.0f}/s"
                f" | load {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
