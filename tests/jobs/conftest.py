"""Jobs tests meet the shared cast (tests/cast.py) and a scheduler driven by hand.

``clock`` pins the app clock at a fixed instant (the alarm sweep and the JobManager both
decide what is due by it). ``wake()`` is one minute-tick of beat: it casts due alarms, then
relays the outbox (the claims' ``jobs.dispatch_runs`` messages) and runs every job the alarms
claimed, as the relay and the default worker would. The relay's kick after COMMIT is off in
these tests: ``relay_outbox()`` is the relay, run by hand inside the test's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.cache import cache

from apps.accounts.models import AccessToken

# Between two minute marks, so a job's first minute is still ahead.
PAST = datetime(2025, 3, 14, 12, 0, 30, tzinfo=UTC)


# The people are the suite's shared cast (tests/cast.py: owner, outsider, operator); these are
# their raw bearer keys for REST and MCP calls.


@pytest.fixture
def owner_key(owner_token: tuple[AccessToken, str]) -> str:
    return owner_token[1]


@pytest.fixture
def outsider_key(outsider_token: tuple[AccessToken, str]) -> str:
    return outsider_token[1]


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.delete_pattern("entitlements:*")
    yield


@pytest.fixture(autouse=True)
def inline_actors(settings) -> None:
    settings.KODY_ACTORS_INLINE = True


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def clock() -> Iterator[Any]:
    import time_machine

    with time_machine.travel(PAST, tick=False) as traveller:
        yield traveller


@pytest.fixture(autouse=True)
def _no_outbox_kick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kody.outbox.core._kick", lambda: None)


def relay_outbox() -> int:
    """``kody.outbox.relay`` for a test's wrapping transaction (the real one refuses to run
    inside a transaction, as its tasks commit on their own): claim, run, delete, until empty.
    A message a task enqueues while it runs (a catch-up claim) is relayed in the same call."""
    import json

    from kody.outbox.core import _claim, _run
    from kody.outbox.models import OutboxMessage

    relayed = 0
    while (claimed := _claim("default")) is not None:
        message_id, task, payload, _attempts = claimed
        _run(task, json.loads(payload) if isinstance(payload, str) else payload)
        OutboxMessage.objects.filter(id=message_id).delete()
        relayed += 1
    return relayed


@pytest.fixture
def wake(
    eager_tasks: None, django_capture_on_commit_callbacks: Callable[..., Any]
) -> Callable[[], int]:
    from apps.jobs.services.runner import wake_due_alarms

    def tick() -> int:
        with django_capture_on_commit_callbacks(execute=True):
            woken = wake_due_alarms()
        relay_outbox()
        return woken

    return tick
