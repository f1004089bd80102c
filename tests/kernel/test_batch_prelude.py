"""A batch over several users: one prelude round trip for all of them (ADR 0022).

The batch's first attempt locks every user's owner row in one statement, reads every user's
call records and tombstones in the next, and points ``search_path`` at each user with that
user's first statement. These tests pin what must hold on that path: each method runs in its
own user's schema and sees its own statement's results, a forged owner and a tombstone are
answered inside the batch without a rerun, and a locked owner row falls back to the
one-user-at-a-time rerun. (A batch now tries the optimistic prelude first and comes here
when a check fails: ADR 0033's amendment, ``test_batch_fresh_prelude.py``; these outcomes
hold on either path.)
"""

from __future__ import annotations

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import OwnerMismatch, runtime
from kody.actors.runtime import execute
from kody.errors import AccountDeleting
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import mark_deleting, unmark_deleting
from tests.kernel.probes import probe_call as call
from tests.kernel.probes import probed_users
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    return probed_users(3)


@pytest.fixture
def reruns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Users the batch had to rerun behind a savepoint (empty: the first attempt committed)."""
    seen: list[str] = []
    guarded = runtime._guarded

    def spy(group, using):  # type: ignore[no-untyped-def]
        seen.append(group.user_id)
        return guarded(group, using)

    monkeypatch.setattr(runtime, "_guarded", spy)
    return seen


def search_path() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        return cursor.fetchone()[0]


def test_each_user_runs_in_its_own_schema_and_sees_its_own_results(users, reruns):
    a, b, c = users
    outcomes = execute(
        [
            call(a, "whoami"),
            call(b, "rows_touched"),
            call(c, "many_first"),
            call(a, "bump"),
            call(b, "whoami"),
            call(c, "bump"),
        ]
    )
    mine, touched, many, bumped_a, theirs, bumped_c = (o.unwrap() for o in outcomes)
    assert reruns == []
    assert mine["search_path"].startswith(schema_name_for(a))
    assert touched["search_path"].startswith(schema_name_for(b))
    assert touched["touched"] == 1  # the UPDATE's own rowcount, not the set_config's
    assert many["search_path"].startswith(schema_name_for(c))
    assert theirs["search_path"].startswith(schema_name_for(b))
    assert (bumped_a, bumped_c) == (2, 2)
    assert search_path() == '"$user", public'


def test_a_forged_owner_and_a_tombstone_are_answered_inside_the_batch(users, reruns):
    a, b, c = users
    mark_deleting(b)
    try:
        outcomes = execute(
            [
                call(a, "bump"),
                call(b, "bump"),  # tombstoned: refused, unrecorded
                call(
                    b,
                    "export_counters",
                    actor=UserMeter.name,
                ),  # deletion-safe: runs
                call(c, "bump", schema_of=a),  # forged: refused, nothing runs
                call(c, "bump"),
            ]
        )
    finally:
        unmark_deleting(b)
    assert reruns == []  # no savepoint rerun: the prelude answered both
    assert outcomes[0].unwrap() == 2
    with pytest.raises(AccountDeleting):
        outcomes[1].unwrap()
    assert outcomes[1].recordable is False
    assert outcomes[2].ok
    with pytest.raises(OwnerMismatch):
        outcomes[3].unwrap()
    assert outcomes[4].unwrap() == 2
    # Nothing was charged to a by the forged call, and b's refused bump was not recorded.
    assert execute([call(a, "bump"), call(b, "bump")])[0].unwrap() == 3
    assert Probe.call(b, "bump") == 3


def test_recorded_calls_answer_from_their_records_in_a_batch(users, reruns):
    a, b, _ = users
    calls = [call(a, "bump"), call(b, "bump"), call(a, "bump")]
    first = [o.unwrap() for o in execute(calls)]
    again = [o.unwrap() for o in execute(calls)]  # redelivered
    assert first == again == [2, 2, 3]
    assert reruns == []
    assert Probe.call(a, "bump") == 4
