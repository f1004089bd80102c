"""What the per-call CPU pass (benchmarks/README.md, issue 9, fifth pass) changed, pinned.

* The call records, their prune and the fence guard go out as literal SQL, with no client-side
  binding pass (``runtime._literal``): every character of an id and an outcome survives.
* A statement that carries a deferred prelude is bound on its own before the prelude goes in
  front of it (``scope.DeferredSearchPath``): its parameters and its ``%%`` mean what they mean
  without a prelude.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from kody.actors.dispatch import call_id_for
from kody.actors.runtime import _literal
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import sent_with_the_prelude
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
    """A key that may be a literal takes the optimistic prelude, any other the plain path;
    both write the record with ``_literal``, and a retry answers from it."""
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
