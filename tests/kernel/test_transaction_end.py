"""A transaction's end — call records, fence guard, ``COMMIT`` — on the psycopg connection's
own cursor (``runtime._finish``, ADR 0036).

Django's cursor is not on that path any more, so what it did there is done by hand and pinned
here: the pending prelude of a transaction whose methods sent nothing goes first in that
query (and its failure is the prelude's, ``deferred.failed``); a transaction an inner
``atomic()`` marked for rollback is refused, not answered as committed; errors are Django's;
the query is in ``connection.queries`` when Django logs queries. And the runtime resolves
its connection once per ``execute`` (``connections[alias]`` is a thread-local lookup).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from kody.actors import OwnerMismatch, runtime
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema import scope
from tests.kernel.probes import counter, prelude_paths, sent_with_the_prelude
from tests.kernel.probes import probe_call as call

pytestmark = pytest.mark.django_db(transaction=True)


def fresh(one: Call):  # type: ignore[no-untyped-def]
    return execute([one], fresh=True)[0]


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    with prelude_paths(monkeypatch, "fresh") as seen:
        yield seen


def test_the_records_query_does_not_pass_djangos_cursor(users):
    a, _ = users
    through_django: list[str] = []

    def count(execute_, sql, params, many, context):  # type: ignore[no-untyped-def]
        through_django.append(sql)
        return execute_(sql, params, many, context)

    with sent_with_the_prelude() as sent, connection.execute_wrapper(count):
        assert fresh(call(a, "rows_touched")).unwrap()["touched"] == 1
    # Django's cursor sent the method's two statements only; psycopg sent three queries, the
    # last one the record and COMMIT (no fence guard outside a shard consumer).
    assert len(through_django) == 2 and not any("actor_calls" in sql for sql in through_django)
    assert len(sent) == 3
    assert "INSERT INTO" in sent[-1] and "actor_calls" in sent[-1]
    assert sent[-1].rstrip().endswith("COMMIT")


def test_with_no_statement_from_the_methods_the_prelude_goes_first_in_the_records_query(
    users, paths
):
    a, _ = users
    paths["queries"] = 0
    with sent_with_the_prelude() as sent:
        assert fresh(call(a, "slow_echo", "x", 0)).unwrap() == {"value": "x", "user": a}
    assert paths == {"fresh": 1, "fell_back": 0, "queries": 1}
    (only,) = sent
    statements = only.split(";\n")
    assert statements[0] == "BEGIN"
    assert "set_config('search_path'" in statements[1]
    assert "actor_owner" in statements[2] and "FOR UPDATE" in statements[2]
    insert = next(i for i, sql in enumerate(statements) if sql.startswith("INSERT INTO"))
    assert "actor_calls" in statements[insert] and insert > 2  # after the checks
    assert statements[-1] == "COMMIT"


def test_a_failed_check_riding_on_the_records_query_is_the_preludes_failure(users, paths):
    # b forges a's schema with a method that sends nothing: the owner check fails in the
    # records' query; told apart as the prelude's failure, the plain path refuses it.
    a, b = users
    with pytest.raises(OwnerMismatch):
        fresh(call(b, "slow_echo", "x", 0, schema_of=a)).unwrap()
    assert paths["fell_back"] == 1


def test_a_transaction_marked_for_rollback_is_refused_not_answered_as_committed(users, paths):
    a, _ = users
    refused: list[BaseException] = []
    finish = runtime._finish

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return finish(*args, **kwargs)
        except BaseException as exc:
            refused.append(exc)
            raise

    runtime._finish = spy  # type: ignore[assignment]
    try:
        fresh(call(a, "swallow_broken"))
    finally:
        runtime._finish = finish  # type: ignore[assignment]
    # The optimistic attempt's end refused the broken transaction (as Django's cursor did)
    # and the call ran the plain way; nothing of the attempt committed.
    assert isinstance(refused[0], TransactionManagementError)
    assert paths["fell_back"] == 1


def test_finish_refuses_before_sending_anything():
    sent_before = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        connection.needs_rollback = True
        with CaptureQueriesContext(connection) as captured:
            with pytest.raises(TransactionManagementError):
                runtime._finish([("SELECT 1", ())], connections[DEFAULT_DB_ALIAS])
        sent_before = list(captured.captured_queries)
    assert sent_before == []


def test_the_records_query_is_in_djangos_query_log(users):
    a, _ = users
    before = counter(a)
    with CaptureQueriesContext(connection) as captured:
        assert fresh(call(a, "bump")).unwrap() == before + 2
    (records,) = [q["sql"] for q in captured.captured_queries if "actor_calls" in q["sql"]]
    assert records.startswith("INSERT INTO") and records.endswith("COMMIT")


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
    """``in_one_query(rows=False)`` (what ``_finish`` sends) reads nothing back, yet an error
    in any statement of the query is raised, as Django's: the guard's failure must be."""
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
