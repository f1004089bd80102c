"""Lock and statement timeouts on actor transactions, and the one lock order."""

from __future__ import annotations

import pytest
from django.db import transaction

from kody.actors import ActorUnavailable, LockOrderRefused
from kody.actors.runtime import execute
from tests.kernel.probes import owner_lock_held
from tests.kernel.probes import probe_call as probe
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_statement_past_the_timeout_fails_alone_and_the_batch_commits(
    owner_id, outsider_id, settings
):
    settings.KODY_ACTOR_STATEMENT_TIMEOUT_MS = 200
    outcomes = execute(
        [
            probe(owner_id, "bump"),
            probe(owner_id, "sleep_in_sql", 3),
            probe(outsider_id, "bump"),
            probe(owner_id, "bump"),
        ]
    )
    assert outcomes[0].unwrap() == 1
    with pytest.raises(ActorUnavailable) as refused:
        outcomes[1].unwrap()
    assert refused.value.details == {"reason": "statement_timeout"}
    assert outcomes[2].unwrap() == 1
    assert outcomes[3].unwrap() == 2  # the slow call's bump was rolled back with it
    settings.KODY_ACTOR_STATEMENT_TIMEOUT_MS = 30000
    assert execute([probe(owner_id, "bump")])[0].unwrap() == 3  # committed, not replayed


def test_a_user_locked_by_an_outer_transaction_fails_alone_after_the_lock_timeout(
    owner_id, outsider_id, settings
):
    settings.KODY_ACTORS_INLINE = True
    for user in (owner_id, outsider_id):
        Probe.call(user, "bump")
    settings.KODY_ACTOR_LOCK_TIMEOUT_MS = 200
    with owner_lock_held(owner_id):  # inline inside atomic(): held until the block ends
        outcomes = execute([probe(owner_id, "bump"), probe(outsider_id, "bump")])
    with pytest.raises(ActorUnavailable) as refused:
        outcomes[0].unwrap()
    assert refused.value.details == {"reason": "lock_timeout"}
    assert outcomes[1].unwrap() == 2  # the other user in the same batch went on
    assert Probe.call(owner_id, "bump") == 3  # the holder's bump, then this one


def test_an_outer_transaction_takes_user_locks_in_ascending_order_only(
    owner_id, outsider_id, inline_actors
):
    low, high = sorted([owner_id, outsider_id])
    with transaction.atomic():
        assert Probe.call(low, "bump") == 1
        assert Probe.call(high, "bump") == 1  # ascending: allowed
        assert Probe.call(low, "bump") == 2  # a lock it already holds: allowed
    with pytest.raises(LockOrderRefused, match="ascending"):
        with transaction.atomic():
            Probe.call(high, "bump")
            Probe.call(low, "bump")  # would wait for low while holding high: refused
    assert Probe.call(low, "bump") == 3  # nothing of the refused transaction stayed
    assert Probe.call(high, "bump") == 2
