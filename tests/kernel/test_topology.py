from __future__ import annotations

from kody.actors.topology import shard_groups, worker_commands, worker_processes


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


def test_shard_workers_default_to_one_process_per_cpu(settings, monkeypatch):
    settings.KODY_ACTOR_SHARDS = 4
    settings.KODY_ACTOR_WORKER_PROCESSES = 0  # the default
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert worker_processes() == 2
    shard_workers = worker_commands("/venv/bin/python")[:-2]
    assert [argv[argv.index("-Q") + 1] for argv in shard_workers] == [
        "actors.shard-0,actors.shard-2",
        "actors.shard-1,actors.shard-3",
    ]
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert worker_processes() == 4  # never more processes than shards
    settings.KODY_ACTOR_WORKER_PROCESSES = 1  # set explicitly, it wins
    assert worker_processes() == 1
