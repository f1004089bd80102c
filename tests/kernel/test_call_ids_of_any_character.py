"""Any call id and any outcome survive the kernel's SQL text.

The call records and the owner checks are written as literal SQL (``kody.actors.batch.literal``):
every character of an id and an outcome reads back as it was, so a redelivered call finds
exactly its record, on either path, and is never applied twice. A statement that carries a
batch's next search path in front of it is bound on its own first: its parameters and its
``%%`` mean what they mean without it.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from kody.actors.batch import literal
from kody.actors.dispatch import call_id_for
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import counter, probe_call
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
                cursor.execute(f"SELECT {literal(text)}")
                assert cursor.fetchone()[0] == text
        finally:
            cursor.execute("RESET standard_conforming_strings")


def test_a_literal_refuses_a_nul():
    with pytest.raises(ValueError):
        literal("a\x00b")


@pytest.mark.parametrize("key", ["plain-key", "it's \\ 100% $$ naïve"])
def test_a_record_keeps_every_character_of_its_id_and_outcome(users, key):
    """Any key takes the optimistic prelude; the record is written with ``literal``, and a
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


def test_a_bound_statement_carrying_the_next_users_search_path_means_the_same(users):
    a, b = users
    value = "it's 100% %s %(x)s \\ $$"
    echo, got = execute([probe_call(a, "slow_echo", "x", 0), probe_call(b, "bound_first", value)])
    assert echo.ok
    assert got.unwrap() == [value, "100%", f"{schema_name_for(b)}, public"]


def keyed(user: str, key: str, method: str = "bump", *args: object) -> Call:
    return Call(**{**vars(probe_call(user, method, *args)), "id": call_id_for(user, key)})


@pytest.mark.parametrize("path", ["plain", "one-statement"])
@pytest.mark.parametrize("batched", [False, True], ids=["lone", "batch"])
def test_a_call_id_of_any_character_finds_its_record_and_applies_once(users, path, batched):
    """Ids holding every character class: the first run applies, the redelivery finds each
    record and answers from it. A literal that did not read back as the id would miss the
    record, and the call would apply twice."""
    a, b = users
    owners = [a, b] if batched else [a]
    if path == "plain":
        before = [counter(user) for user in owners]
    else:
        before = [
            execute([keyed(user, "first", "tally", "x")])[0].unwrap()["count"] for user in owners
        ]
    for n, key in enumerate(NASTY[1:], start=1):
        batch = [
            keyed(user, key) if path == "plain" else keyed(user, key, "tally", key)
            for user in owners
        ]
        first = [outcome.unwrap() for outcome in execute(batch)]
        counts = first if path == "plain" else [each["count"] for each in first]
        # counter() leaves the count one above what it returned.
        assert counts == [each + n + (path == "plain") for each in before], key
        assert [outcome.unwrap() for outcome in execute(batch)] == first, key  # redelivered
