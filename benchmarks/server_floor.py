"""The server's share of an inline actor call: the kernel's own SQL replayed by pgbench.

    python benchmarks/server_floor.py [--seconds 4] [--rounds 2] [--users 1]

An inline ``UserMeter.call`` is Python (dispatch, Django's transaction and cursors, the
runtime) plus what Postgres does for its queries. This benchmark separates the two. It makes
one real inline call and records the queries it sends, exactly as sent (a hook on psycopg's
cursor, so whatever path the runtime takes is what gets replayed). Then pgbench replays them
with one client and no Python in the loop: one script line per query, the statements of a
query joined with ``\\;``, the call record's id made unique per transaction. The baseline is
what ``actors.py``'s raw-SQL row sends (``BEGIN``, ``SET LOCAL search_path``, the charge,
``COMMIT``, one round trip each).

Rows: each pgbench run's median transaction latency and its backend's CPU per transaction
(the embedded server's, read from ``/proc``), the median over ``--rounds`` runs taken in
turns:

* ``raw``: the raw row's four round trips;
* ``kernel``: the inline call's queries, as the runtime sends them;
* ``kernel, one round trip``: the same statements as ONE query (a floor no method can reach,
  since a method reads its statement's result before the records are written);
* ``kernel without <piece>``: the same queries minus one piece (the owner lock, the tombstone
  check, the call record, the meter's prune CTEs), so each piece's cost shows.

Then the live rows: raw SQL and the inline call from Python in this process (``actors.py``'s
two rows, p50). It prints the replay's ratio (the ratio an inline call would have with no
client CPU at all) and how much client CPU per call is left for a target ratio.

``--users N`` (N > 1) replays a shard worker's batch instead: one call for each of N users,
decoded off the wire and run by ``kody.actors.runtime.execute`` as a shard worker runs them
(one transaction, the prelude with the first user's first statement, one round trip per
user, the records and ``COMMIT`` in one). Its rows are per call (a transaction's numbers
over N): as sent, as one round trip (what pipelining every user's statement into one query
would leave the server), and without the prune CTEs or the call records; the live row is
the same batch run in this process. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _accounts import live_account_ids
from _harness import pg_binary, psql_args, setup_django
from actors import DAY, LIMIT, closed_loop, meter_call, raw_sql

TARGET = 1.5  # issue 9: an inline call's p50 at most 1.5x raw SQL's


def captured_queries(call: Callable[[], object]) -> list[str]:
    """The query texts ``call`` sends, in order, as they reach psycopg (bound already, since
    the runtime binds client-side)."""
    import psycopg

    sent: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        text = query if isinstance(query, str) else query.as_string(self)
        if params:
            text = psycopg.ClientCursor(self.connection).mogrify(text, params)
        sent.append(text)
        return original(self, query, params, **kwargs)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    try:
        call()
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]
    return sent


def statements(query: str) -> list[str]:
    """A multi-statement query's statements, each on one line (the runtime joins them with
    ``;`` and a newline; none of its literals holds a newline)."""
    return [" ".join(part.split()) for part in query.split(";\n") if part.strip()]


def script(queries: list[list[str]]) -> str:
    """A pgbench script: one line per query, its statements joined with ``\\;``."""
    return "".join("\\; ".join(each) + ";\n" for each in queries if each)


# The charge behind its prune CTEs: the method's (an UPDATE) or its statement form's, which a
# batch sends (a ``charged`` CTE, ADR 0037).
_PRUNE = re.compile(
    r"^WITH\s+pruned_\w+ AS \(.*?\),\s+pruned_\w+ AS \(.*?\)(?:\s+(UPDATE .*)|,\s+(charged AS .*))$"
)
# One user's record insert, or a batch's (every user's, merged into one statement).
_RECORD = re.compile(r"^(?:WITH w0 AS \()?INSERT INTO \S+\.actor_calls\b")


def without(queries: list[list[str]], piece: str) -> list[list[str]]:
    """The queries with one piece of the kernel's work left out."""
    out = []
    for query in queries:
        kept = []
        for statement in query:
            if piece == "owner lock" and "actor_owner" in statement:
                continue
            if piece == "tombstone check" and "kody_user_schemas" in statement:
                continue
            if piece == "call record" and _RECORD.match(statement):
                continue
            if piece == "prune CTEs" and (match := _PRUNE.match(statement)):
                statement = match.group(1) or f"WITH {match.group(2)}"
            kept.append(statement)
        out.append(kept)
    return out


_RECORD_ID = re.compile(r"(\(id, actor, method, outcome, created_at\) VALUES \(|\), \()E'[^']*'")
_CHECKED_IDS = re.compile(r"(actor_calls WHERE id IN \()([^)]*)\)")


def unique_record_ids(queries: list[list[str]]) -> list[list[str]]:
    """Every call record's id as a fresh value per pgbench transaction (it is the primary
    key: a replayed id would hit ``ON CONFLICT DO NOTHING`` and write nothing), and the
    record check looking for ids no record has (the captured ids have records by then, so
    the check would fail every replayed transaction). Those stay literals: a volatile
    ``gen_random_uuid()`` there cannot be an index condition, and the check would scan the
    table the replay keeps growing."""

    def absent(match: re.Match[str]) -> str:
        count = len(re.findall(r"E'", match.group(2)))
        ids = ", ".join(f"E'replay-absent-{index}'" for index in range(count))
        return f"{match.group(1)}{ids})"

    def fresh(statement: str) -> str:
        if _RECORD.match(statement):
            statement = _RECORD_ID.sub(r"\1gen_random_uuid()::text", statement)
        return _CHECKED_IDS.sub(absent, statement)

    return [[fresh(each) for each in query] for query in queries]


TICK = os.sysconf("SC_CLK_TCK")


def postmaster_pid() -> int | None:
    """The server's postmaster, when it runs on this host and we may read it (the embedded
    server): its children's CPU is what pgbench's backend used, counted once it exits."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW data_directory")
            folder = Path(cursor.fetchone()[0])
        pid = int((folder / "postmaster.pid").read_text().split()[0])
        Path(f"/proc/{pid}/stat").read_text()
    except Exception:
        return None
    return pid


def children_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s exited and reaped children (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


def pgbench_run(text: str, seconds: float, postmaster: int | None) -> tuple[float, float | None]:
    """One pgbench client running ``text`` for ``seconds``: its median transaction latency
    (ms, from the per-transaction log: the live rows are medians too, a mean would carry
    the tail) and its backend's CPU per transaction (ms; None when the server's processes
    cannot be read). CPU is the steadier of the two on a shared host: waiting for a CPU
    lengthens a latency but adds no CPU time."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "script.sql"
        path.write_text(text)
        if postmaster is not None:
            time.sleep(0.3)  # the previous backend reaped
            before = children_cpu(postmaster)
        subprocess.run(
            [pg_binary("pgbench"), *psql_args(), "-n", "-f", str(path), "-c", "1"]
            + ["-T", str(max(1, int(seconds))), "-l", f"--log-prefix={folder}/log"],
            capture_output=True,
            text=True,
            check=True,
        )
        micros = [
            int(line.split()[2])
            for log in Path(folder).glob("log.*")
            for line in log.read_text().splitlines()
        ]
    cpu = None
    if postmaster is not None:
        time.sleep(0.3)  # this backend reaped
        cpu = (children_cpu(postmaster) - before) / len(micros) * 1000
    return statistics.median(micros) / 1000, cpu


def shard_batch(users: list[str]) -> Callable[[int], object]:
    """One call per user, decoded off the wire and run the way a shard worker runs a batch."""
    from apps.entitlements.actor import UserMeter
    from kody.actors.dispatch import _build, new_key
    from kody.actors.runtime import execute
    from kody.actors.wire import Call

    charge = {"resource": "execute_calls_per_day", "day": DAY, "limit": LIMIT}

    def run(index: int) -> object:
        calls = [_build(UserMeter, user, "consume", (), charge, new_key(), True) for user in users]
        return execute([Call.decode(call.encode()) for call in calls])

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--users", type=int, default=1, help="N > 1: replay a shard batch of one call per user"
    )
    options = parser.parse_args()
    setup_django()
    from django.conf import settings

    # pgbench replays the texts in a session of its own, which holds none of this one's
    # prepared statements (ADR 0038): capture the plain statements.
    settings.KODY_ACTOR_PREPARED_MAX = 0
    from kody.userschema.naming import quoted, schema_name_for
    from kody.userschema.schemas import ensure_schema

    users = live_account_ids(max(1, options.users))
    user, batched = users[0], len(users) > 1
    for each in users:
        ensure_schema(each)
    settings.KODY_ACTORS_INLINE = True
    inline, warm = meter_call([user]), meter_call(users)
    for index in range(20 * len(users)):  # the day's rows, the schema cache, the prune memo
        warm(index)
    measured = shard_batch(users) if batched else inline
    measured(0)  # its own path warm too: what is captured next is a steady call
    kernel = unique_record_ids(
        [statements(query) for query in captured_queries(lambda: measured(0))]
    )
    if not any(_RECORD.match(each) for query in kernel for each in query):
        raise SystemExit(f"no call record among the captured queries: {kernel}")
    charge = (
        "UPDATE daily_counters SET count = count + 1, revision = revision + 1,"
        " updated_at = now() WHERE resource = 'execute_calls_per_day'"
        f" AND day = '{DAY}'::date AND count + 1 <= {LIMIT} RETURNING count, revision"
    )
    raw = [
        ["BEGIN"],
        [f"SET LOCAL search_path TO {quoted(schema_name_for(user))}, public"],
        [charge],
        ["COMMIT"],
    ]
    pieces = (
        ("prune CTEs", "call record")
        if batched
        else ("owner lock", "tombstone check", "call record", "prune CTEs")
    )
    variants = {
        "raw SQL (4 round trips)": raw,
        "kernel, as sent": kernel,
        "kernel, one round trip": [[each for query in kernel for each in query]],
        **{f"kernel without the {piece}": without(kernel, piece) for piece in pieces},
    }
    # A batch's transaction holds len(users) calls: its rows are per call.
    per_call = {name: 1 if name.startswith("raw") else len(users) for name in variants}
    what = f"a shard batch of {len(users)} users' calls" if batched else "an inline call"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Server floor of {what} ({options.seconds:g}s per run, {options.rounds} rounds"
        f" in turns, 1 pgbench client, {os.cpu_count()} CPUs, load average {load})\n"
    )
    print(f"The queries of {what}, as replayed:")
    for number, query in enumerate(kernel, 1):
        for statement in query:
            print(f"  {number}. {statement[:110]}{'...' if len(statement) > 110 else ''}")
    print()

    postmaster = postmaster_pid()
    latencies: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    live: dict[str, list[float]] = {"raw": [], "kernel": []}
    for _ in range(options.rounds):
        for name, queries in variants.items():
            latency, cpu = pgbench_run(script(queries), options.seconds, postmaster)
            latencies[name].append(latency / per_call[name])
            if cpu is not None:
                cpus[name].append(cpu / per_call[name])
        live["raw"].append(closed_loop(raw_sql(user), 1, options.seconds)["p50_ms"])
        run = closed_loop(measured, 1, options.seconds)["p50_ms"]
        live["kernel"].append(run / len(users))
    median = {name: statistics.median(values) for name, values in latencies.items()}
    base = median["raw SQL (4 round trips)"]
    unit = "call" if batched else "tx"
    print(f"  {'pgbench replay (per call)':42} {'p50':>8}  {'':10}  {'':12}  server CPU/{unit}")
    for name, value in median.items():
        cpu = f"{statistics.median(cpus[name]):.3f} ms" if cpus[name] else "n/a"
        print(
            f"  {name:42} {value:6.3f} ms  {value / base:5.2f}x raw  ({value - base:+.3f} ms)"
            f"  {cpu}"
        )
    raw_p50, kernel_p50 = (statistics.median(live[key]) for key in ("raw", "kernel"))
    floor = median["kernel, as sent"] / base
    label = "the batch, per call" if batched else "inline call"
    print(
        f"\nFrom Python, p50: raw SQL {raw_p50:.3f} ms, {label} {kernel_p50:.3f} ms"
        f" = {kernel_p50 / raw_p50:.2f}x"
    )
    replay_share = median["kernel, as sent"] - base
    if batched:
        one = median["kernel, one round trip"]
        print(
            f"  the replay alone (no client CPU): {floor:.2f}x raw per call; in one round trip"
            f" {one / base:.2f}x ({one - median['kernel, as sent']:+.3f} ms a call)"
        )
    else:
        budget = TARGET * raw_p50 - raw_p50 - replay_share
        print(
            f"  the replay alone (no client CPU): {floor:.2f}x raw\n"
            f"  the inline call's time beyond raw SQL's: {kernel_p50 - raw_p50:.3f} ms, of"
            f" which the server's replay {replay_share:.3f} ms\n"
            f"  left for the client side at {TARGET:g}x: {budget:.3f} ms per call beyond raw"
            f" SQL's own (now {kernel_p50 - raw_p50 - replay_share:.3f} ms)"
        )
    print(f"\n  load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
