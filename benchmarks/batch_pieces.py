"""What each piece of a shard batch costs the server: a real batch replayed from its texts.

    python benchmarks/batch_pieces.py [--users 8] [--runs 300] [--rounds 3]

Runs ``--users`` users' ``UserMeter.consume`` calls through ``kody.actors.runtime.execute``
as a shard worker does (prepared statements on, after warm-up batches so every statement is
its schema's prepared one) and records the one query the batch sends, exactly as sent: each
charge carries its own record (ADR 0043). Then one plain psycopg session (its own
``PREPARE``s of the same statements) replays it ``--runs`` times a variant, the call ids new
in every run so each replay checks and writes as the first did, ``--rounds`` rounds in
turns. Per variant: the backend's CPU per call (read from ``/proc``: the server must run on
this host) and the wall time per call, the median over the rounds, and the difference to
the batch as sent:

* ``as sent``: the one query;
* ``records apart``: the layout before ADR 0043 — the plain charges (each its schema's
  prepared statement, no record in it), then a second query with every user's records as
  one literal statement of data-modifying CTEs (``runtime._merged``) and ``COMMIT``;
* ``plain charges``: each charge with its record as the plain statement, not prepared
  (what ADR 0038 replaced);
* ``other lock``: the owner locks in the form the kernel does not send — for one user the
  plain statement in place of its prepared one, for several users one prepared statement
  per user in place of the one statement over every user (tried for ADR 0038, not kept);
* ``no owner lock``, ``no record check``: that piece left out;
* ``no records insert``: the charges without their records (each the plain charge's
  prepared statement), nothing else.

Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

from _accounts import live_account_ids
from _harness import cpu_seconds, setup_django
from actors import DAY

LIMIT = 10**12


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    setup_django()
    import psycopg
    from django.conf import settings
    from django.db import connection

    from apps.entitlements.actor import UserMeter
    from apps.entitlements.actor.meter import _CONSUME_OR_CURRENT, _consume_params, _plan_consume
    from kody.actors import runtime
    from kody.actors.dispatch import _build, new_key
    from kody.actors.prepared import name_for, numbered
    from kody.actors.wire import Call
    from kody.userschema import scope
    from kody.userschema.naming import schema_name_for

    settings.KODY_ACTORS_INLINE = True
    settings.KODY_ACTOR_PREPARED_MAX = max(settings.KODY_ACTOR_PREPARED_MAX, 4 * options.users)
    users = sorted(live_account_ids(options.users))
    charge = {"resource": "execute_calls_per_day", "day": DAY, "limit": LIMIT}
    for user in users:
        UserMeter.call(user, "consume", **charge)
    sent: list[list[str]] = []
    execute_begun = scope._execute_begun

    def spy(raw, cursor, texts):  # type: ignore[no-untyped-def]
        sent.append(list(texts))
        return execute_begun(raw, cursor, texts)

    ids: list[str] = []  # the last batch's call ids, which its queries hold
    last: list[Call] = []
    answers: list[str] = []  # the last batch's outcomes as a record before ADR 0043 held them

    def batch() -> None:
        built = [_build(UserMeter, user, "consume", (), charge, new_key(), True) for user in users]
        calls = [Call.decode(call.encode()) for call in built]  # as a shard worker gets them
        ids[:] = [call.id for call in calls]
        last[:] = calls
        outcomes = runtime.execute(calls)
        assert all(outcome.ok for outcome in outcomes)
        answers[:] = [outcome.text for outcome in outcomes]

    scope._execute_begun = spy
    try:
        for _ in range(4):  # seen, prepared, executed
            sent.clear()
            batch()
    finally:
        scope._execute_begun = execute_begun
    (first,) = sent  # one query: BEGIN, the prelude, the charges with their records, COMMIT
    first = first[1:] if first[0] == "BEGIN" else first
    params = _consume_params("execute_calls_per_day", DAY, LIMIT, 1)
    body, values = numbered(_CONSUME_OR_CURRENT, params)
    planned = _plan_consume("execute_calls_per_day", DAY, LIMIT)
    carried_sql = runtime._with_record(planned, last[0])[0]
    carried_body, _ = numbered(carried_sql, runtime._with_record(planned, last[0])[1])
    nowait = len(users) > 1  # a batch's locks; one user's calls wait for theirs
    lock_sql = [runtime.owner_lock(schema_name_for(user), nowait=nowait) for user in users]
    with connection.cursor() as cursor:
        plain_carried = {
            call.id: cursor.mogrify(*runtime._with_record(planned, call)) for call in last
        }
        plain_execute = {
            user: cursor.mogrify(
                f"EXECUTE {name_for(schema_name_for(user), _CONSUME_OR_CURRENT)}"
                f"({', '.join(['%s'] * len(values))})",
                values,
            )
            for user in users
        }
    carried_names = {name_for(schema_name_for(call.user_id), carried_sql): call for call in last}
    # The records as the batch wrote them before ADR 0043: one literal insert per user,
    # merged into one statement (its outcomes as the calls were answered).
    groups = [runtime._Group(call.user_id, call.schema, [i], [call]) for i, call in enumerate(last)]
    apart = runtime._merged(
        [
            statement
            for group, text in zip(groups, answers, strict=True)
            for statement in runtime._record_statements(
                group, [(group.calls[0], runtime.Outcome(text=text, ok=True))], strict=True
            )
            if statement[0].startswith("INSERT")
        ]
    )[0][0]
    conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    for user, lock in zip(users, lock_sql, strict=True):
        schema = schema_name_for(user)
        conn.execute(f"SET search_path = {schema}, public")
        conn.execute(f"PREPARE {name_for(schema, _CONSUME_OR_CURRENT)} AS {body}")
        conn.execute(f"PREPARE {name_for(schema, carried_sql)} AS {carried_body}")
        conn.execute(f"PREPARE {name_for(schema, lock)} AS {lock}")
    pid = conn.info.backend_pid

    def carried(text: str) -> Call | None:
        if text.startswith("EXECUTE "):
            return carried_names.get(text.split("(")[0][8:])
        return None

    lock_names = {
        name_for(schema_name_for(u), lock) for u, lock in zip(users, lock_sql, strict=True)
    }
    one_lock = "SELECT 1 / (count(*) = {n})::int FROM ({branches}) AS owners".format(
        n=len(users),
        branches=" UNION ALL ".join(
            f'SELECT 1 FROM (SELECT 1 FROM "{schema_name_for(u)}".actor_owner WHERE id = 1'
            f" AND owner_id = E'{u}' FOR UPDATE{' NOWAIT' if nowait else ''}) AS o{i}"
            for i, u in enumerate(users)
        ),
    )

    def is_lock(text: str) -> bool:
        if text.startswith("EXECUTE "):
            return text.split("(")[0][8:] in lock_names
        return "actor_owner" in text and "FOR UPDATE" in text

    prepared_locks = [
        f"EXECUTE {name_for(schema_name_for(u), lock)}(E'{u}')"
        for u, lock in zip(users, lock_sql, strict=True)
    ]

    def variant(name: str) -> list[list[str]]:
        a = list(first)
        if name in ("records apart", "no records insert"):
            a = [plain_execute[c.user_id] if (c := carried(t)) else t for t in a]
            if name == "records apart":
                return [["BEGIN", *a[:-1]], [apart, "COMMIT"]]
        if name == "plain charges":
            a = [plain_carried[c.id] if (c := carried(t)) else t for t in a]
        if name == "other lock":
            at = next(i for i, t in enumerate(a) if is_lock(t))
            other = [one_lock] if a[at].startswith("EXECUTE") else prepared_locks
            a = [*a[:at], *other, *[t for t in a[at:] if not is_lock(t)]]
        if name == "no owner lock":
            a = [t for t in a if not is_lock(t)]
        if name == "no record check":
            a = [t for t in a if "deleting_at IS NOT NULL" not in t]
        return [["BEGIN", *a]]

    recorded = re.compile("|".join(re.escape(each) for each in ids))

    def replay(queries: list[list[str]]) -> tuple[float, float]:
        texts = [";\n".join(query) for query in queries]
        start, wall = cpu_seconds(pid), time.perf_counter()
        for _ in range(options.runs):
            fresh = {old: new_key() for old in ids}  # each replay checks and writes new ids
            for text in texts:
                conn.execute(recorded.sub(lambda m, new=fresh: new[m.group(0)], text).encode())
        calls = options.runs * len(users)
        server, elapsed = cpu_seconds(pid) - start, time.perf_counter() - wall
        return server / calls * 1000, elapsed / calls * 1000

    names = [
        "as sent",
        "records apart",
        "plain charges",
        "other lock",
        "no owner lock",
        "no record check",
        "no records insert",
    ]
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for _ in range(options.rounds):
        for name in names:
            seen[name].append(replay(variant(name)))
    print(
        f"A {len(users)}-user batch replayed ({options.runs} runs a variant, {options.rounds} "
        f"rounds in turns, load {', '.join(f'{x:.2f}' for x in os.getloadavg())})\n"
    )
    base = statistics.median(cpu for cpu, _ in seen["as sent"])
    for name in names:
        server = statistics.median(cpu for cpu, _ in seen[name])
        wall = statistics.median(wall for _, wall in seen[name])
        print(
            f"{name:18} backend CPU {server:6.3f} ms/call ({server - base:+.3f})"
            f"   wall {wall:6.3f} ms/call"
        )


if __name__ == "__main__":
    main()
