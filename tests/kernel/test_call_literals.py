"""What the per-call CPU pass (benchmarks/README.md, issue 9, fifth pass) changed, pinned.

* The call records, their prune and the fence guard go out as literal SQL, with no client-side
  binding pass (``runtime._literal``): every character of an id and an outcome survives.
* A statement that carries a deferred prelude is bound on its own before the prelude goes in
  front of it (``scope.DeferredSearchPath``): its parameters and its ``%%`` mean what they mean
  without a prelude.
* The optimistic prelude's checks write ids with the same ``_literal`` (sixth pass, ADR 0036):
  a call id of any character class takes that prelude, and its record check finds exactly
  its record (a redelivery is answered from it, never applied twice).
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from kody.actors.dispatch import call_id_for
from kody.actors.runtime import _literal, execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import counter, prelude_paths, probe_call, sent_with_the_prelude
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)

NASTY = [
    "",
    "plain",
    "it's",
    "''",
    "back\\slash\\",
    "\\'",
    "E'\\x41'",
    "100%",
    "%s %(name)s %%",
    "$$ $tag$",
    "semi; colon -- /* */",
    "naïve 日本 😀",
    "line\nbreak\ttab\r",
]


@pytest.mark.parametrize("standard", ["on", "off"])
def test_a_literal_reads_back_as_the_same_text(standard):
    with connection.cursor() as cursor:
        cursor.execute(f"SET standard_conforming_strings = {standard}")
        try:
            for text in NASTY:
                cursor.execute(f"SELECT {_literal(text)}")
                assert cursor.fetchone()[0] == text
        finally:
            cursor.execute("RESET standard_conforming_strings")


def test_a_literal_refuses_a_nul():
    with pytest.raises(ValueError):
        _literal("a\x00b")


@pytest.mark.parametrize("key", ["plain-key", "it's \\ 100% $$ naïve"])
def test_a_record_keeps_every_character_of_its_id_and_outcome(users, key):
    """Any key takes the optimistic prelude; the record is written with ``_literal``, and a
    retry answers from it."""
    a, _ = users
    value = "".join(NASTY)
    first = Probe.call(a, "slow_echo", value, 0, idempotency_key=key)
    assert first == {"value": value, "user": a}
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT id, outcome::text FROM "{schema_name_for(a)}".actor_calls WHERE id = %s',
            [call_id_for(a, key)],
        )
        (record_id, outcome), *more = cursor.fetchall()
    assert (record_id, more) == (call_id_for(a, key), [])
    assert json.loads(outcome) == {"ok": True, "value": first}
    # The retry answers from that record, not by running again.
    assert Probe.call(a, "slow_echo", "other", 0, idempotency_key=key) == first


def test_a_bound_first_statement_carries_the_prelude_and_means_the_same(users):
    a, _ = users
    value = "it's 100% %s %(x)s \\ $$"
    with sent_with_the_prelude() as sent:
        got = Probe.call(a, "bound_first", value)
    assert got == [value, "100%", f"{schema_name_for(a)}, public"]
    assert sent[0].startswith("BEGIN"), sent  # the prelude went out with this statement


def keyed(user: str, key: str) -> Call:
    return Call(**{**vars(probe_call(user, "bump")), "id": call_id_for(user, key)})


@pytest.mark.parametrize("runs", ["_run_fresh", "_run_fresh_batch"])
def test_a_call_id_of_any_character_takes_the_prelude_and_its_record_check(
    users, monkeypatch, runs
):
    """Queued calls (record check on) whose ids hold every character class: the first run
    goes through the optimistic prelude, the redelivery's check finds each record and the
    plain path answers from it. A literal that did not read back as the id would miss the
    record, and the call would apply twice."""
    a, b = users
    before = [counter(a), counter(b)]
    lone = runs == "_run_fresh"
    with prelude_paths(monkeypatch, "optimistic", runs=runs) as paths:
        for n, key in enumerate(NASTY[1:], start=1):
            batch = [keyed(a, key)] if lone else [keyed(a, key), keyed(b, key)]
            first = [outcome.unwrap() for outcome in execute(batch)]
            # counter() leaves the count one above what it returned.
            expected = [before[0] + n + 1, before[1] + n + 1]
            assert first == expected[: len(batch)], key
            assert paths["fell_back"] == n - 1, key  # the prelude went through
            again = [outcome.unwrap() for outcome in execute(batch)]  # redelivered
            assert again == first, key
            assert paths["fell_back"] == n, key  # the record check failed, as it must
    applied = len(NASTY) - 1
    assert counter(a) == before[0] + applied + 1
    assert counter(b) == before[1] + (1 if lone else applied + 1)
