"""A batch runs several users in one transaction, and each user's methods run in that user's
schema and see their own statements' results: the next user's search path rides on its first
statement, whatever that statement is, and the connection's search path is back where it was
once the batch ends.
"""

from __future__ import annotations

import pytest
from django.db import connection

from kody.actors.runtime import execute
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import probe_call as call
from tests.kernel.probes import probed_users, round_trips

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    return probed_users(3)


def search_path() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        return cursor.fetchone()[0]


def test_each_user_runs_in_its_own_schema_and_sees_its_own_results(users):
    a, b, c = users
    with round_trips() as sent:
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
    assert mine["search_path"].startswith(schema_name_for(a))
    assert touched["search_path"].startswith(schema_name_for(b))
    assert touched["touched"] == 1  # the UPDATE's own rowcount, not the set_config's
    assert many["search_path"].startswith(schema_name_for(c))
    assert theirs["search_path"].startswith(schema_name_for(b))
    assert (bumped_a, bumped_c) == (2, 2)
    assert search_path() == '"$user", public'
    assert "ROLLBACK" not in sent  # the first attempt committed: nothing was rerun


def test_a_user_whose_methods_send_nothing_passes_its_turn_on(users):
    a, b, _ = users
    echo, where = execute([call(a, "slow_echo", "x", 0), call(b, "whoami")])
    assert echo.unwrap() == {"value": "x", "user": a}
    assert where.unwrap()["search_path"].startswith(schema_name_for(b))
