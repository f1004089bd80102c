"""What the kernel's own queries keep of Django's cursor: a transaction an inner ``atomic()``
marked for rollback is never answered as committed, errors are Django's, every query is in
Django's query log, and the runtime resolves its connection once per ``execute``
(``connections[alias]`` is a thread-local lookup each time).
"""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from kody.actors import runtime
from kody.actors.runtime import execute
from kody.userschema import scope
from tests.kernel.probes import counter, round_trips
from tests.kernel.probes import probe_call as call

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_transaction_marked_for_rollback_is_refused_not_committed(users):
    a, _ = users
    before = counter(a)
    with round_trips() as sent:
        execute([call(a, "swallow_broken")])
    # The method's write sits in a transaction its own inner atomic() doomed: the kernel's
    # ending query refuses it (as Django's cursor would) and it rolls back, never committed.
    assert "ROLLBACK" in sent
    assert counter(a) == before + 1  # counter()'s own bump only


def test_a_query_is_refused_in_a_broken_transaction_before_anything_is_sent():
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        connection.needs_rollback = True
        with CaptureQueriesContext(connection) as captured:
            with pytest.raises(TransactionManagementError):
                scope.in_one_query(connections[DEFAULT_DB_ALIAS], [("SELECT 1", ())])
        sent = list(captured.captured_queries)
    assert sent == []


def test_the_records_query_is_in_djangos_query_log(users):
    a, _ = users
    before = counter(a)
    with CaptureQueriesContext(connection) as captured:
        assert execute([call(a, "bump")])[0].unwrap() == before + 2
    (records,) = [q["sql"] for q in captured.captured_queries if "INSERT INTO" in q["sql"]]
    assert "actor_calls" in records and records.endswith("COMMIT")


@pytest.mark.parametrize("users_in_batch", [1, 2])
def test_execute_looks_its_connection_up_once(users, monkeypatch, users_in_batch):
    lookups: list[str] = []

    class Counted:
        def __getitem__(self, alias: str):  # type: ignore[no-untyped-def]
            lookups.append(alias)
            return connections[alias]

    monkeypatch.setattr(runtime, "connections", Counted())
    monkeypatch.setattr(scope, "connections", Counted())
    batch = [call(user, "rows_touched") for user in users[:users_in_batch]]
    assert all(outcome.ok for outcome in execute(batch))
    assert lookups == [DEFAULT_DB_ALIAS]


def test_a_query_whose_rows_are_not_read_still_fails_on_any_statement():
    """``in_one_query(rows=False)`` (what ``kody.actors.records.finish`` sends) reads nothing
    back, yet an error in any statement of the query is raised, as Django's: the guard's
    failure must be."""
    from django.db import DatabaseError

    with transaction.atomic():
        assert (
            scope.in_one_query(connections[DEFAULT_DB_ALIAS], [("SELECT 1", ())], rows=False) == []
        )
        with pytest.raises(DatabaseError) as failed:
            scope.in_one_query(
                connections[DEFAULT_DB_ALIAS],
                [("SELECT 1", ()), ("SELECT 2", ()), ("SELECT 1 / 0", ())],
                rows=False,
            )
        assert getattr(failed.value.__cause__, "sqlstate", None) == "22012"
        transaction.set_rollback(True)


def test_a_query_reads_only_the_rows_asked_for_and_still_fails_on_any_statement():
    """``in_one_query(rows={...})`` (what a planned batch sends: its charges' rows, not its
    locks' or search paths') reads the statements named and gives every other one an empty
    list; a statement without columns gives one too. An error anywhere is still raised."""
    from django.db import DatabaseError

    conn = connections[DEFAULT_DB_ALIAS]
    statements = [("SELECT 1", ()), ("SELECT 2, 'b'", ()), ("SET LOCAL work_mem = '8MB'", ())]
    with transaction.atomic():
        assert scope.in_one_query(conn, statements, rows={1, 2}) == [[], [(2, "b")], []]
        assert scope.in_one_query(conn, statements) == [[(1,)], [(2, "b")], []]
        assert scope.in_one_query(conn, statements, rows=set()) == [[], [], []]
        with pytest.raises(DatabaseError) as failed:
            scope.in_one_query(conn, [("SELECT 1", ()), ("SELECT 1 / 0", ())], rows={0})
        assert getattr(failed.value.__cause__, "sqlstate", None) == "22012"
        transaction.set_rollback(True)
