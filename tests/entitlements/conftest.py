"""Entitlements tests: a Stripe fake, inline actors and real shard workers (cast: tests/cast.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import cache

from tests.entitlements.stripe_fake import StripeFake
from tests.schemas import drop_user_schemas


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Tests share one Redis; a plan cached by another test must not leak in. Only our own keys
    # are dropped: FLUSHDB would also wipe a broker sharing the database.
    cache.delete_pattern("entitlements:*")
    yield


@pytest.fixture
def stripe_fake(settings) -> Iterator[StripeFake]:
    fake = StripeFake()
    settings.STRIPE_API_BASE = fake.start()
    settings.STRIPE_SECRET_KEY = "sk_test_fake"
    settings.STRIPE_WEBHOOK_SECRET = "whsec_test_fake"
    settings.BILLING_ENABLED = True
    yield fake
    fake.stop()


@pytest.fixture
def billing_off(settings) -> None:
    settings.STRIPE_SECRET_KEY = ""
    settings.STRIPE_WEBHOOK_SECRET = ""
    settings.BILLING_ENABLED = False


@pytest.fixture(autouse=True)
def inline_actors(settings) -> None:
    """Actor calls run in-process unless a test asks for the real queue (``celery_worker``)."""
    settings.KODY_ACTORS_INLINE = True


@pytest.fixture
def committed_schemas_dropped(transactional_db: None) -> Iterator[None]:
    # Transactional tests commit user schemas; the next test reuses the same stable ids.
    drop_user_schemas()
    yield
    drop_user_schemas()


@pytest.fixture
def celery_worker(settings, committed_schemas_dropped: None, django_db_blocker) -> Iterator[object]:
    """A real Celery worker (solo pool, in a thread) draining every actor shard queue.

    Not ``default``: leftover lane tasks from other runs must not run inside these tests.
    """
    import time

    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from kody.actors import transport

    settings.KODY_ACTORS_INLINE = False
    client = transport.client()
    for key in client.scan_iter(match=transport.shard_keys_pattern()):
        client.delete(key)
    queues = transport.all_queue_names()
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
        deadline = time.monotonic() + 20
        shards = range(len(queues))
        while not all(client.exists(transport.lease_key(shard)) for shard in shards):
            if time.monotonic() > deadline:
                raise RuntimeError("shard consumers did not start")
            time.sleep(0.05)
        yield worker
