"""Kernel test cast: two users who have never met, a real broker, a real Celery worker."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from kody import embedded
from kody.lanes import Cadence, Lane, registry
from tests.accounts.factories import UserFactory
from tests.schemas import drop_user_schemas


def new_user_id() -> str:
    """A real, live account's stable id: the kernel creates schemas only for live accounts
    (``KODY_ACCOUNT_DIRECTORY``), so kernel tests make the accounts they act as."""
    return UserFactory(username=f"k-{secrets.token_hex(8)}").stable_user_id


@pytest.fixture(scope="session")
def user_schemas_cleanup(django_db_setup, django_db_blocker) -> Iterator[None]:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        drop_user_schemas()
    yield
    with django_db_blocker.unblock():
        drop_user_schemas()


@pytest.fixture
def owner_id(user_schemas_cleanup: None) -> str:
    return new_user_id()


@pytest.fixture
def outsider_id(user_schemas_cleanup: None) -> str:
    return new_user_id()


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Two users in ascending id order, each with its schema and a ``Probe`` counter at 1, and
    actor calls inline (a module that needs another cast defines its own ``users``)."""
    from tests.kernel.probes import probed_users  # probes imports this module

    settings.KODY_ACTORS_INLINE = True
    return probed_users(2)


@pytest.fixture
def inline_actors(settings):  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True


def clear_actor_queues() -> None:
    from kody.actors import transport

    client = transport.client()
    for key in client.scan_iter(match=transport.shard_keys_pattern()):
        client.delete(key)


@pytest.fixture(scope="module")
def celery_worker(django_db_setup, django_db_blocker, user_schemas_cleanup):  # type: ignore[no-untyped-def]
    """A real Celery worker (solo pool, in a thread) draining every shard queue and ``default``."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from kody.actors import transport

    clear_actor_queues()
    queues = [*transport.all_queue_names(), "default"]
    with (
        django_db_blocker.unblock(),
        start_worker(
            app,
            pool="solo",
            concurrency=1,
            queues=queues,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=30,
        ) as worker,
    ):
        _wait_for_leases(len(transport.all_queue_names()))
        yield worker


def _wait_for_leases(shards: int, timeout: float = 20.0) -> None:
    from kody.actors import transport

    client = transport.client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(client.exists(transport.lease_key(n)) for n in range(shards)):
            return
        time.sleep(0.05)
    raise RuntimeError("shard consumers did not start")


@pytest.fixture
def lanes(monkeypatch):
    """``lanes(name, fn, cadence=..., **options)`` declares a lane for one test."""
    registry.autodiscover()

    def add(name: str, fn, cadence: Cadence = Cadence.EVERY_TICK, **options) -> None:  # type: ignore[no-untyped-def]
        monkeypatch.setitem(registry._lanes, name, Lane(name, cadence, fn, **options))

    return add


@pytest.fixture
def enqueued(monkeypatch):
    """Names the dispatcher enqueues, captured instead of sent to the broker."""
    from kody.lanes import tasks

    names: list[str] = []
    monkeypatch.setattr(tasks.run, "apply_async", lambda args: names.append(args[0]))
    return names


@pytest.fixture
def private_redis(settings, tmp_path: Path) -> Iterator[tuple[str, Path, redis.Redis]]:
    """A Redis of the test's own (started like the embedded one) as the actor broker: its
    ``INFO commandstats`` count only what the test did."""
    data_dir = tmp_path / "r"
    url = embedded.start_redis(data_dir)
    settings.KODY_ACTOR_REDIS_URL = url
    settings.KODY_ACTOR_SHARDS = 1
    settings.KODY_ACTORS_INLINE = False
    admin = redis.Redis.from_url(url)
    try:
        yield url, data_dir, admin
    finally:
        admin.close()
        embedded.stop_redis(data_dir)
