"""A call made without an idempotency key gets one generated; every error that names a key to
retry with names that one, and retrying with it applies the call once."""

from __future__ import annotations

import pytest

from kody.actors import ActorCallTimeout, transport
from kody.actors.runtime import execute
from kody.actors.wire import Call
from tests.kernel.conftest import clear_actor_queues
from tests.kernel.probes import probed_users
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def user(user_schemas_cleanup: None, settings) -> str:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    (one,) = probed_users(1)  # today's count is 1
    return one


def test_a_timed_out_call_retried_with_the_key_it_names_applies_once(user, settings):
    settings.KODY_ACTORS_INLINE = False
    clear_actor_queues()
    with pytest.raises(ActorCallTimeout) as caught:
        Probe.call(user, "bump", timeout=0.3)  # no shard worker: nobody answers in time
    # A worker takes the queued call late and runs it (the caller has given up waiting).
    raw = transport.client().rpop(transport.queue_key(transport.shard_for(user)))
    (late,) = execute([Call.decode(raw)])
    assert late.unwrap() == 2
    # The caller retries with the key the timeout named: answered from the record, not rerun.
    settings.KODY_ACTORS_INLINE = True
    assert Probe.call(user, "bump", idempotency_key=caught.value.call_id) == 2
    assert Probe.call(user, "peek")["count"] == 2
    clear_actor_queues()


def test_a_cast_returns_the_key_that_finds_its_record(user):
    key = Probe.cast(user, "bump")
    assert Probe.call(user, "bump", idempotency_key=key) == 2  # the cast's answer, replayed
    assert Probe.call(user, "peek")["count"] == 2
