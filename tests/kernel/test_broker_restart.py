"""The shard broker restarted under load: nothing acknowledged is lost, every caller hears back.

A real worker process drains one shard on a Redis of its own (started like the embedded one,
append-only file on). Callers keep casting and calling while the test shuts that Redis down
and starts it again, several times. A caller that meets the outage gets ``ActorUnavailable``
(never a bare connection error) and retries with the same idempotency key; in the end every
step of every user ran exactly once, in order.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from kody import embedded
from kody.actors import ActorCallTimeout, ActorUnavailable, transport
from tests.kernel.conftest import new_user_id
from tests.kernel.sample_actors import Probe
from tests.kernel.test_actor_crash import start_worker

pytestmark = [pytest.mark.queue, pytest.mark.django_db(transaction=True)]

RESTARTS = 3
USERS = 3


class Caller(threading.Thread):
    """One user's sequence: two casts, then a call; every outage is retried with the key."""

    def __init__(self, user: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.user, self.stop = user, stop
        self.last = 0
        self.unavailable = 0
        self.error: BaseException | None = None

    def _send(self, n: int) -> None:
        key = f"restart:{self.user[:12]}:{n}"
        while True:
            try:
                if n % 3:
                    Probe.cast(self.user, "step", n, 0.002, idempotency_key=key)
                    return
                assert Probe.call(self.user, "step", n, 0.002, timeout=10, idempotency_key=key) == n
                return
            except ActorUnavailable as exc:
                assert exc.status == 503 and exc.details["idempotency_key"] == key
                self.unavailable += 1
                time.sleep(0.05)
            except ActorCallTimeout:
                pass  # told to retry with the key

    def run(self) -> None:
        try:
            n = 0
            while not self.stop.is_set() or n % 3:
                n += 1
                self._send(n)
            self.last = n
        except BaseException as exc:
            self.error = exc


def test_restarting_the_broker_under_load_loses_no_acknowledged_call(
    settings, user_schemas_cleanup, tmp_path: Path
):
    data_dir = tmp_path / "broker"
    url = embedded.start_redis(data_dir)
    broker = redis.Redis.from_url(url)
    assert broker.config_get("appendonly") == {"appendonly": "yes"}
    assert broker.config_get("appendfsync") == {"appendfsync": "everysec"}
    settings.KODY_ACTOR_SHARDS = 1
    settings.KODY_ACTOR_REDIS_URL = url
    settings.KODY_ACTORS_INLINE = False
    env = {"KODY_ACTOR_SHARDS": "1", "KODY_ACTOR_REDIS_URL": url, "KODY_ACTOR_LEASE_SECONDS": "1"}
    worker = start_worker(env)
    stop = threading.Event()
    callers = [Caller(new_user_id(), stop) for _ in range(USERS)]
    try:
        deadline = time.monotonic() + 60
        while not broker.exists(transport.lease_key(0)):
            assert time.monotonic() < deadline, "the shard consumer did not start"
            time.sleep(0.05)
        for caller in callers:
            caller.start()
        for _ in range(RESTARTS):
            time.sleep(1.0)  # under load
            embedded.stop_redis(data_dir)
            time.sleep(0.5)  # callers meet the outage
            embedded.start_redis(data_dir)
        time.sleep(1.0)
        stop.set()
        for caller in callers:
            caller.join(timeout=120)
            assert not caller.is_alive()
            assert caller.error is None, repr(caller.error)
    finally:
        stop.set()
        worker.terminate()
        worker.wait(timeout=30)
        embedded.stop_redis(data_dir)

    assert sum(caller.unavailable for caller in callers) > 0  # the outages were met
    settings.KODY_ACTORS_INLINE = True
    for caller in callers:
        assert caller.last >= 3
        assert Probe.call(caller.user, "chaos_state") == {
            "last": caller.last,
            "applied": caller.last,  # no acknowledged cast lost, none applied twice
            "out_of_order": 0,
        }
