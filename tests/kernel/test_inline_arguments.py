"""An inline call's arguments reach the method exactly as they would off the queue (through
JSON); it skips the round trip only when it cannot change an argument
(``dispatch._as_off_the_queue``: plain scalars, by exact type)."""

from __future__ import annotations

import enum
from datetime import date

import pytest

from kody.actors import dispatch
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


class Colour(enum.IntEnum):
    RED = 1


class Mood(enum.StrEnum):
    CALM = "calm"


def test_plain_scalars_skip_the_round_trip_and_anything_else_takes_it(users):
    a, _ = users
    scalars = Call("i", a, schema_name_for(a), Probe.name, "arg_types", ["s", 1, 1.5, True, None])
    assert dispatch._as_off_the_queue(scalars) is scalars
    assert Probe.call(a, "arg_types", "s", 1, 1.5, True, None, k=2) == {
        "args": ["str", "int", "float", "bool", "NoneType"],
        "kwargs": {"k": "int"},
    }
    # What JSON changes, the method sees changed, as off the queue.
    got = Probe.call(
        a, "arg_types", date(2000, 1, 1), (1, 2), Colour.RED, Mood.CALM, [1], n={"x": 1}
    )
    assert got == {
        "args": ["str", "list", "int", "str", "list"],
        "kwargs": {"n": "dict"},
    }
