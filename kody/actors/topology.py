"""The Celery processes Kody runs: shard workers, the default worker, and beat.

``manage.py up`` starts exactly these. Each shard worker drains its shard queues with one
thread per shard (``kody.actors.worker``), so every shard has a single writer however the
shards are spread over processes and machines (docs/architecture/kernel.md).
"""

from __future__ import annotations

import os

from django.conf import settings

from kody.actors.transport import queue_name


def shard_groups(shards: int, processes: int) -> list[list[int]]:
    processes = max(1, min(processes, shards))
    return [list(range(start, shards, processes)) for start in range(processes)]


def worker_processes() -> int:
    """Shard-worker processes to start: ``KODY_ACTOR_WORKER_PROCESSES``, or one per CPU when
    it is 0 (the default); never more than there are shards. Each process has its own GIL, so
    its consumer threads' Python no longer queues behind another shard's."""
    wanted = settings.KODY_ACTOR_WORKER_PROCESSES or os.cpu_count() or 1
    return max(1, min(wanted, settings.KODY_ACTOR_SHARDS))


def worker_commands(python: str) -> list[list[str]]:
    base = [python, "-m", "celery", "-A", "config", "--workdir", str(settings.BASE_DIR)]
    commands = []
    groups = shard_groups(settings.KODY_ACTOR_SHARDS, worker_processes())
    for index, group in enumerate(groups):
        queues = ",".join(queue_name(shard) for shard in group)
        commands.append(
            [
                *base,
                "worker",
                "-n",
                f"actors{index}@%h",
                "-Q",
                queues,
                "-P",
                "solo",
                "-c",
                "1",
                "-l",
                "INFO",
            ]
        )
    commands.append([*base, "worker", "-n", "default@%h", "-Q", "default", "-c", "2", "-l", "INFO"])
    # The schedule lives in the database (django-celery-beat), where /admin/ can see and pause
    # it; named here as well as in settings so the process list says which scheduler runs.
    commands.append([*base, "beat", "-S", settings.CELERY_BEAT_SCHEDULER, "-l", "INFO"])
    return commands
