from __future__ import annotations

from kody.actors.topology import shard_groups, worker_commands


def test_topology_is_shard_workers_a_default_worker_and_beat(settings):
    settings.KODY_ACTOR_SHARDS = 4
    settings.KODY_ACTOR_WORKER_PROCESSES = 1
    commands = worker_commands("/venv/bin/python")
    assert all(argv[:4] == ["/venv/bin/python", "-m", "celery", "-A"] for argv in commands)
    shard, default, beat = commands
    queues = shard[shard.index("-Q") + 1]
    assert queues == "actors.shard-0,actors.shard-1,actors.shard-2,actors.shard-3"
    assert shard[shard.index("-c") + 1] == "1" and shard[shard.index("-P") + 1] == "solo"
    assert default[default.index("-Q") + 1] == "default"
    assert "beat" in beat


def test_shards_spread_over_processes_without_overlap():
    groups = shard_groups(8, 3)
    assert sorted(s for group in groups for s in group) == list(range(8))
    assert shard_groups(2, 5) == [[0], [1]]
