"""What each piece of a shard batch costs the server: a real batch replayed from its texts.

    python benchmarks/batch_pieces.py [--users 8] [--runs 300] [--rounds 3]

Runs ``--users`` users' ``UserMeter.consume`` calls through ``kody.actors.runtime.execute``
as a shard worker does (prepared statements on, after warm-up batches so every statement is
its schema's prepared one) and records the two queries the batch sends, exactly as sent.
Then one plain psycopg session (its own ``PREPARE``s of the same statements) replays them
``--runs`` times a variant, the call ids new in every run so each replay checks and writes
as the first did, ``--rounds`` rounds in turns. Per variant: the backend's CPU per call
(read from ``/proc``: the server must run on this host) and the wall time per call, the
median over the rounds, and the difference to the batch as sent:

* ``as sent``: the two queries;
* ``plain charges``: the charges as the plain statement (what ADR 0038 replaced);
* ``other lock``: the owner locks in the form the kernel does not send — for one user the
  plain statement in place of its prepared one, for several users one prepared statement
  per user in place of the one statement over every user (tried for ADR 0038, not kept);
* ``no owner lock``, ``no record check``, ``no records insert``: that piece left out.

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
    from apps.entitlements.actor.meter import _CONSUME_OR_CURRENT, _consume_params
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

    def batch() -> None:
        built = [_build(UserMeter, user, "consume", (), charge, new_key(), True) for user in users]
        calls = [Call.decode(call.encode()) for call in built]  # as a shard worker gets them
        ids[:] = [call.id for call in calls]
        assert all(outcome.ok for outcome in runtime.execute(calls))

    scope._execute_begun = spy
    try:
        for _ in range(4):  # seen, prepared, executed
            sent.clear()
            batch()
    finally:
        scope._execute_begun = execute_begun
    first, second = sent
    params = _consume_params("execute_calls_per_day", DAY, LIMIT, 1)
    body, _ = numbered(_CONSUME_OR_CURRENT, params)
    with connection.cursor() as cursor:
        plain_charge = cursor.mogrify(_CONSUME_OR_CURRENT, params)
    nowait = len(users) > 1  # a batch's locks; one user's calls wait for theirs
    lock_sql = [runtime.owner_lock(schema_name_for(user), nowait=nowait) for user in users]
    conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    for user, lock in zip(users, lock_sql, strict=True):
        schema = schema_name_for(user)
        conn.execute(f"SET search_path = {schema}, public")
        conn.execute(f"PREPARE {name_for(schema, _CONSUME_OR_CURRENT)} AS {body}")
        conn.execute(f"PREPARE {name_for(schema, lock)} AS {lock}")
    pid = conn.info.backend_pid

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
        a, b = list(first), list(second)
        if name == "plain charges":
            a = [plain_charge if t.startswith("EXECUTE") and not is_lock(t) else t for t in a]
        if name == "other lock":
            at = next(i for i, t in enumerate(a) if is_lock(t))
            other = [one_lock] if a[at].startswith("EXECUTE") else prepared_locks
            a = [*a[:at], *other, *[t for t in a[at:] if not is_lock(t)]]
        if name == "no owner lock":
            a = [t for t in a if not is_lock(t)]
        if name == "no record check":
            a = [t for t in a if "deleting_at IS NOT NULL" not in t]
        if name == "no records insert":
            b = [t for t in b if "INSERT INTO" not in t]
        return [["BEGIN", *a], b]

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
