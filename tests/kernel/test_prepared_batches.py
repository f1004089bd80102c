"""A planned batch's statements run as per-schema prepared statements (ADR 0038).

The second time a database session sends one user's planned statement (the meter's charge)
it is ``PREPARE``d under a name of that schema's own and run as ``EXECUTE``; from then on
only the ``EXECUTE`` goes out. Names are bounded per session, survive nothing the session
loses (``DISCARD``), and a query that failed after or before its ``PREPARE`` leaves the next
batch planned, not falling back for ever. Every charge still applies exactly once, to its
own user only.
"""

from __future__ import annotations

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from apps.entitlements.actor.meter import _plan_consume
from kody.actors import prepared, runtime
from kody.actors.prepared import name_for, numbered
from kody.actors.runtime import execute, owner_lock
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import metered_users, prelude_paths, probe_call

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-03-14"
RESOURCE = "execute_calls_per_day"


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Three users, ascending, each with today's counter row; a session with nothing
    prepared yet."""
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_ACTOR_PREPARED_MAX = 512
    ids = metered_users(3, day=DAY, limit=1000)
    connection.close()  # a new session: nothing prepared, nothing seen
    return ids


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """What the planned path sent (each query's statements) and how often it fell back."""
    texts: list[list[str]] = []
    real = runtime.in_one_query

    def spy(conn, statements, **kwargs):  # type: ignore[no-untyped-def]
        texts.append([sql for sql, _ in statements])
        return real(conn, statements, **kwargs)

    with prelude_paths(monkeypatch, "optimistic", runs="_run_fresh_batch") as seen:
        monkeypatch.setattr(runtime, "in_one_query", spy)
        seen["texts"] = texts  # type: ignore[assignment]
        yield seen


def charge(user: str, amount: int = 1, limit: int = 1000) -> object:
    kwargs = {"resource": RESOURCE, "day": DAY, "limit": limit, "amount": amount}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def count(user: str) -> int:
    return UserMeter.call(user, "read", resource=RESOURCE, day=DAY)["count"]


def session_holds() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'kp\\_%'")
        return {name for (name,) in cursor.fetchall()}


def charge_name(user: str) -> str:
    """The user's charge as a batch and a lone call both send it: with its record joined
    (ADR 0042, 0043), one prepared statement for both."""
    planned = _plan_consume(RESOURCE, DAY, 1000)
    call = probe_call(user, "consume", actor=UserMeter.name)
    return name_for(schema_name_for(user), runtime._with_record(planned, call)[0])


def lock_name(user: str, *, nowait: bool = True) -> str:
    """The name of the user's owner-lock check in a batch's prelude (``NOWAIT``) or a lone
    call's."""
    schema = schema_name_for(user)
    return name_for(schema, owner_lock(schema, nowait=nowait))


def names(*users: str) -> set[str]:
    """What a session holds once these users' batches ran twice: each one's charge and lock."""
    return {name for user in users for name in (charge_name(user), lock_name(user))}


def planned_query(sent) -> list[str]:  # type: ignore[no-untyped-def]
    """The statements of the last planned query (the one carrying the charges)."""
    return next(
        each
        for each in reversed(sent["texts"])
        if any("charged AS" in t or "EXECUTE" in t for t in each)
    )


def test_a_users_second_batch_prepares_its_charge_and_the_third_only_executes(users, sent):
    a, b, _ = users
    outcomes = [o.unwrap()["count"] for o in execute([charge(a), charge(b)])]
    assert outcomes == [2, 2]
    assert not any(t.startswith(("PREPARE", "EXECUTE")) for t in planned_query(sent))
    assert session_holds() == set()  # seen once: nothing prepared for a one-off user

    assert [o.unwrap()["count"] for o in execute([charge(a), charge(b)])] == [3, 3]
    second = planned_query(sent)
    # Both users' locks and charges: each lock leads its user's statements (ADR 0040).
    assert sum(t.startswith("PREPARE") for t in second) == 4
    assert session_holds() == names(a, b)

    assert [o.unwrap()["count"] for o in execute([charge(a, 5), charge(b, 7)])] == [8, 10]
    third = planned_query(sent)
    assert not any(t.startswith("PREPARE") for t in third)
    assert [t.split("(")[0] for t in third if t.startswith("EXECUTE")] == [
        f"EXECUTE {lock_name(a)}",
        f"EXECUTE {charge_name(a)}",
        f"EXECUTE {lock_name(b)}",
        f"EXECUTE {charge_name(b)}",
    ]
    assert sent["fell_back"] == 0
    assert [count(a), count(b)] == [8, 10]


def test_each_user_runs_only_its_own_schemas_statement(users, sent):
    a, b, c = users
    for _ in range(3):
        execute([charge(a), charge(b)])
    assert charge_name(a) != charge_name(b)
    # The third user was never charged in a batch: nothing of its own, and its row untouched.
    assert charge_name(c) not in session_holds()
    assert [count(a), count(b), count(c)] == [4, 4, 1]
    statements = planned_query(sent)
    b_path = next(
        i for i, t in enumerate(statements) if schema_name_for(b) in t and "search_path" in t
    )
    b_execute = statements.index(next(t for t in statements if charge_name(b) in t))
    a_execute = statements.index(next(t for t in statements if charge_name(a) in t))
    assert a_execute < b_path < b_execute  # b's statement runs on b's search path only


def test_a_session_holds_at_most_the_configured_number(users, sent, settings):
    settings.KODY_ACTOR_PREPARED_MAX = 4
    a, b, c = users
    for _ in range(2):
        execute([charge(a), charge(b)])
    assert session_holds() == names(a, b)
    for _ in range(2):
        execute([charge(b), charge(c)])
    # c's PREPAREs deallocated the least recently used names, a's.
    assert session_holds() == names(b, c)
    assert any(t == f"DEALLOCATE {charge_name(a)}" for t in planned_query(sent))
    assert set(prepared.held(connection)) == session_holds()
    assert sent["fell_back"] == 0
    assert [count(a), count(b), count(c)] == [3, 5, 3]


def test_a_session_that_lost_its_statements_falls_back_once_and_prepares_again(users, sent):
    a, b, _ = users
    for _ in range(2):
        execute([charge(a), charge(b)])
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what a pooler's reset or DISCARD ALL does
    assert [o.unwrap()["count"] for o in execute([charge(a), charge(b)])] == [4, 4]
    assert sent["fell_back"] == 1  # the EXECUTE failed; the plain path charged each once
    assert [o.unwrap()["count"] for o in execute([charge(a), charge(b)])] == [5, 5]
    assert sent["fell_back"] == 1  # re-read, prepared again, planned
    assert session_holds() == names(a, b)


def test_a_query_that_failed_before_its_prepare_ran_does_not_leave_a_missing_name(users, sent):
    a, b, _ = users
    execute([charge(a), charge(b)])  # both seen once
    # a's second charge overflows the counter: the query fails at a's statement, after a's
    # PREPARE ran and before b's could (PREPARE is not transactional either way).
    big, most = 2**62, 2**63 - 1
    outcomes = execute([charge(a, big, most), charge(a, big, most), charge(b)])
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[2].unwrap()["count"] == 3
    assert sent["fell_back"] == 1
    # a's lock and charge ran (and stay prepared); b's lock and charge, after them, never did.
    assert session_holds() == names(a, b) - {charge_name(b), lock_name(b)}
    readings = [o.unwrap() for o in execute([charge(a), charge(b)])]
    assert [r["allowed"] for r in readings] == [False, True]
    assert readings[1]["count"] == 4
    assert sent["fell_back"] == 1  # the session was re-read: b prepared, nothing fell back
    assert session_holds() == names(a, b)
    assert count(a) == big + 2


def test_off_when_the_bound_is_zero(users, sent, settings):
    settings.KODY_ACTOR_PREPARED_MAX = 0
    a, b, _ = users
    for _ in range(3):
        execute([charge(a), charge(b)])
    assert session_holds() == set()
    assert not any(t.startswith(("PREPARE", "EXECUTE")) for q in sent["texts"] for t in q)
    assert [count(a), count(b)] == [4, 4]


def test_placeholders_are_numbered_once_per_name():
    sql = "SELECT %(a)s, %(b)s, %(a)s, 'x%%'"
    assert numbered(sql, {"b": 2, "a": 1}) == ("SELECT $1, $2, $1, 'x%'", [1, 2])
    assert numbered("SELECT %s, %s", [7, 8]) == ("SELECT $1, $2", [7, 8])
    with pytest.raises(ValueError):
        numbered("SELECT %(a)s, %s", {"a": 1})


def test_the_charge_keeps_a_generic_plan_after_five_runs(users):
    """What the prepared statement is for: Postgres stops planning the charge per call."""
    a, b, _ = users
    for _ in range(9):  # seen, prepared, then eight runs of the prepared statement
        execute([charge(a), charge(b)])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = %s",
            [charge_name(a)],
        )
        generic, custom = cursor.fetchone()
    assert custom == 5 and generic == 3
    assert count(a) == 10


def test_a_lone_inline_charge_runs_as_its_prepared_statement(users, settings):
    """A lone call gains the prepared statement too; the day's first charge (no row yet)
    still falls back to the method, which bootstraps the row, and applies once."""
    settings.KODY_ACTORS_INLINE = True
    a = users[0]
    for _ in range(3):
        UserMeter.call(a, "consume", resource=RESOURCE, day=DAY, limit=1000)
    assert charge_name(a) in session_holds()
    assert count(a) == 4
    first = UserMeter.call(a, "consume", resource=RESOURCE, day="2031-03-15", limit=1000)
    assert (first["allowed"], first["count"]) == (True, 1)
    assert count(a) == 4


def test_another_users_lone_call_runs_nothing_prepared_for_someone_else(users, settings):
    settings.KODY_ACTORS_INLINE = True
    a, b, _ = users
    for _ in range(3):
        UserMeter.call(a, "consume", resource=RESOURCE, day=DAY, limit=1000)
    before = session_holds()
    assert UserMeter.call(b, "consume", resource=RESOURCE, day=DAY, limit=1000)["count"] == 2
    assert session_holds() == before  # b seen once: nothing of a's ran for b
    assert [count(a), count(b)] == [4, 2]


def test_a_prepared_owner_lock_still_refuses_a_forged_owner_and_a_tombstone(users, sent):
    """The lock check as the schema's prepared statement checks what its plain text did:
    another user's call into this schema is refused, and so is a marked account."""
    from kody.actors import OwnerMismatch
    from kody.userschema.schemas import mark_deleting, unmark_deleting

    a, b, _ = users
    for _ in range(2):
        execute([charge(a), charge(b)])
    assert names(a, b) <= session_holds()
    forged = probe_call(
        b, "consume", actor=UserMeter.name, schema_of=a, resource=RESOURCE, day=DAY, limit=1000
    )
    outcomes = execute([charge(a), forged])
    assert outcomes[0].unwrap()["count"] == 4
    with pytest.raises(OwnerMismatch):
        outcomes[1].unwrap()
    mark_deleting(b)
    try:
        refused = execute([charge(a), charge(b)])
        assert refused[0].unwrap()["count"] == 5
        assert not refused[1].ok and "AccountDeleting" in refused[1].text
    finally:
        unmark_deleting(b)
    assert [count(a), count(b)] == [5, 3]
    for _ in range(2):  # a's lone lock (it waits: no NOWAIT): seen, then prepared
        assert execute([charge(a)])[0].ok
    assert lock_name(a, nowait=False) in session_holds()
    with pytest.raises(OwnerMismatch):
        execute([forged])[0].unwrap()
    assert [count(a), count(b)] == [7, 3]


def test_a_lone_calls_prelude_executes_its_prepared_lock(users, monkeypatch):
    from tests.kernel.probes import sent_with_the_prelude

    a = users[0]
    for _ in range(2):
        UserMeter.call(a, "consume", resource=RESOURCE, day=DAY, limit=1000)
    with sent_with_the_prelude() as queries:
        assert UserMeter.call(a, "consume", resource=RESOURCE, day=DAY, limit=1000)["count"] == 4
    first = queries[0].split(";\n")
    assert first[0] == "BEGIN" and "set_config('search_path'" in first[1]
    assert first[2].startswith(f"EXECUTE {lock_name(a, nowait=False)}(")
    assert "deleting_at" in first[3]
    # The charge with its record, then the fence guard's place and COMMIT: one query.
    assert first[4].startswith(f"EXECUTE {charge_name(a)}(")
    assert first[-1] == "COMMIT" and len(queries) == 1


def test_a_batchs_owner_locks_run_each_on_its_users_own_path_in_ascending_order(users):
    """With prepared statements on, a planned batch locks each owner row with its own
    statement, ascending user id as before, each right after that user's search path (where
    its prepared statement was planned: ADR 0040), before the user's charge: plain the first
    time, then PREPARE and EXECUTE, then EXECUTE alone. The tombstone check comes last, once
    every lock is held."""
    from tests.kernel.probes import sent_with_the_prelude

    schemas = [schema_name_for(user) for user in users]

    def sections() -> list[list[str]]:
        with sent_with_the_prelude() as queries:
            assert all(o.ok for o in execute([charge(u) for u in reversed(users)]))
        statements = queries[0].split(";\n")
        assert statements[0] == "BEGIN"
        # The batch's one query (ADR 0043): the tombstone check after every user's section,
        # then the prunes when due, the fence guard's place and COMMIT.
        assert statements[-1] == "COMMIT" and len(queries) == 1
        tombstone = next(i for i, t in enumerate(statements) if "deleting_at" in t)
        assert "actor_calls" not in statements[tombstone]
        assert not any(t.startswith(("EXECUTE", "WITH")) for t in statements[tombstone:])
        paths = [i for i, t in enumerate(statements) if "set_config('search_path'" in t]
        assert [next(s for s in schemas if s in statements[i]) for i in paths] == schemas
        bounds = [*paths, tombstone]
        return [statements[bounds[k] + 1 : bounds[k + 1]] for k in range(len(paths))]

    plain, preparing, executing = sections(), sections(), sections()
    for section, schema in zip(plain, schemas, strict=True):
        assert "FOR UPDATE NOWAIT" in section[0] and schema in section[0]
    assert [[t.split(" ")[0] for t in section[:2]] for section in preparing] == [
        ["PREPARE", "EXECUTE"]
    ] * 3
    assert [section[0] for section in executing] == [
        f"EXECUTE {lock_name(u)}(E'{u}')" for u in users
    ]
    assert all(section[1].startswith("EXECUTE") for section in executing)  # the charge
    assert [count(u) for u in users] == [4, 4, 4]


def test_a_later_users_held_owner_row_reruns_the_batch_and_applies_each_once(users, settings):
    """A later user's lock, in that user's own section of the planned query (ADR 0040),
    fails NOWAIT on a row another transaction holds, after the first user's charge ran: the
    whole query rolls back, and the savepoint rerun charges the first user once and refuses
    the held user after its own lock timeout."""
    from kody.actors import ActorUnavailable
    from tests.kernel.probes import owner_lock_held

    settings.KODY_ACTOR_LOCK_TIMEOUT_MS = 200
    a, b, c = users
    for _ in range(2):  # prepared: the batch takes the own-path layout
        execute([charge(a), charge(b), charge(c)])
    assert names(a, b, c) <= session_holds()
    with owner_lock_held(b):
        outcomes = execute([charge(a), charge(b), charge(c)])
    assert outcomes[0].unwrap()["count"] == 4
    with pytest.raises(ActorUnavailable) as refused:
        outcomes[1].unwrap()
    assert refused.value.details == {"reason": "lock_timeout"}
    assert outcomes[2].unwrap()["count"] == 4
    assert [count(a), count(b), count(c)] == [4, 3, 4]
