"""Actor calls through the shard queue vs the same work done directly, in one run.

    python benchmarks/actors.py [--seconds 5] [--rounds 1] [--rows WORDS]

Prints p50/p99 latency and calls/s for: pgbench's single-row upsert, the meter's SQL run
straight from Python, an inline actor call, one Celery task per call (the rejected design),
call() through the queue for one user and for 64 users, and the product's metering path
(``entitlements.services.consume``: the cached plan plus one meter charge) for 64 users —
then the ratios the kernel issue asked for and issue 9's targets, each marked met or MISSED.
``--rounds N`` runs every row N times (the Celery rows once), each round against its own
pgbench baselines, and closes with each figure's median and how many rounds met its target.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
from collections.abc import Callable

from _accounts import live_account_ids
from _harness import (
    celery_worker,
    row,
    setup_django,
    shard_worker,
)
from _load import closed_loop, closed_loop_procs, interleaved, pgbench

DAY = "2026-11-29"
LIMIT = 10**12


# The meter's warm statement as the raw rows send it, on the user's search path.
RAW_STATEMENT = (
    "UPDATE daily_counters SET count = count + 1, revision = revision + 1, updated_at = now()"
    " WHERE resource = %s AND day = %s AND count + 1 <= %s RETURNING count, revision"
)


def raw_search_path(user: str) -> str:
    from kody.userschema.naming import quoted, schema_name_for

    return f"SET LOCAL search_path TO {quoted(schema_name_for(user))}, public"


def raw_sql(user: str) -> Callable[[int], object]:
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    local = threading.local()
    statement, set_path = RAW_STATEMENT, raw_search_path(user)

    def call(_: int) -> object:
        if not hasattr(local, "conn"):
            local.conn = psycopg.connect(**params)
        with local.conn.transaction():
            local.conn.execute(set_path)
            return local.conn.execute(statement, ["execute_calls_per_day", DAY, LIMIT]).fetchone()

    return call


def raw_sql_beside_inline(user: str) -> Callable[[int], object]:
    """``raw_sql``'s statements, bound and sent the same way (a server-binding cursor), on
    the connection the inline call uses: one Postgres backend for both, where ``raw_sql``
    keeps a backend of its own."""
    import psycopg
    from django.db import connection

    statement, set_path = RAW_STATEMENT, raw_search_path(user)

    def call(_: int) -> object:
        connection.ensure_connection()
        conn = connection.connection  # autocommit between calls, as Django leaves it
        with conn.transaction(), psycopg.Cursor(conn) as cursor:
            cursor.execute(set_path)
            return cursor.execute(statement, ["execute_calls_per_day", DAY, LIMIT]).fetchone()

    return call


def meter_call(users: list[str]) -> Callable[[int], object]:
    from apps.entitlements.actor import UserMeter

    def call(index: int) -> object:
        user = users[index % len(users)]
        return UserMeter.call(
            user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT
        )

    return call


def mixed_call(users: list[str]) -> Callable[[int], object]:
    """Each caller alternates a meter charge and a RunLog write (a run with two log lines)
    for its user: two actors of one user, interleaved, as an agent call does."""
    from apps.entitlements.actor import UserMeter
    from apps.jobs.actor import RunLog

    turns: dict[int, int] = {}

    def call(index: int) -> object:
        user = users[index % len(users)]
        turn = turns[index] = turns.get(index, 0) + 1
        if turn % 2:
            return UserMeter.call(
                user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT
            )
        run = {"surface": "execute", "status": "running", "started_at": "2026-11-29T12:00:00+00:00"}
        lines = [{"message": "started"}, {"message": f"turn {turn}", "fields": {"turn": turn}}]
        return RunLog.call(user, "record", run, lines)

    return call


def consume_call(users: list[str]) -> Callable[[int], object]:
    """What an agent call pays for its quota check: the plan from the cache, then the meter's
    charge for today (the product's path, where ``meter_call`` calls the actor directly)."""
    from apps.entitlements import services

    def call(index: int) -> object:
        return services.consume(users[index % len(users)], "execute_calls_per_day")

    return call


def celery_task_call() -> Callable[[int], object]:
    from benchmarks._celery_baseline import upsert

    def call(index: int) -> object:
        return upsert.apply_async(args=[f"celery{index % 64}"]).get(timeout=30)

    return call


# Issue 9's targets: (label, the result's key, the bound, whether the result must stay at or
# below it, how to print it). None as a bound: reported, no target. The indented lines are
# the target's figure measured another way, to tell the host's swings from the kernel's.
TARGETS = (
    ("inline call p50 / raw SQL p50", "inline_vs_raw", 1.5, True, "{:.2f}x"),
    ("  the same, interleaved call by call", "inline_vs_raw_paired", None, True, "{:.2f}x"),
    ("  the same, interleaved on one backend", "inline_vs_raw_one_backend", None, True, "{:.2f}x"),
    ("  raw SQL, two backends in turn / alone", "raw_in_turns_vs_alone", None, True, "{:.2f}x"),
    ("lone queued call p50", "lone_p50_ms", 2.0, True, "{:.2f} ms"),
    ("one user calls/s / pgbench 1-client", "one_user_share", 0.60, False, "{:.0%}"),
    ("  against the pgbench next to the rows", "one_user_share_next", None, False, "{:.0%}"),
    ("64 users calls/s / pgbench 8-client", "many_users_share", 0.35, False, "{:.0%}"),
    ("  against the pgbench next to the rows", "many_users_share_next", None, False, "{:.0%}"),
    ("mixed meter+RunLog / pgbench 8-client", "mixed_share", None, False, "{:.0%}"),
    ("meter consume(), 64 users / pgbench 8", "meter_share", 0.30, False, "{:.0%}"),
)


def meets(figure: float, bound: float, at_most: bool) -> bool:
    """Whether ``figure`` meets a target: at or below ``bound`` (``at_most``), else at or
    above it."""
    return figure <= bound if at_most else figure >= bound


def verdict(label: str, figure: float, bound: float | None, at_most: bool, shape: str) -> str:
    """One target's line: the figure, and the target with ``met`` or ``MISSED`` (only
    ``(reported)`` without a bound)."""
    shown = shape.format(figure)
    if bound is None:
        return f"  {label:40} {shown:>9}   (reported)"
    met = meets(figure, bound, at_most)
    target = f"{'<=' if at_most else '>='} {shape.format(bound)}"
    return f"  {label:40} {shown:>9}   target {target:9} {'met' if met else 'MISSED'}"


def verdicts(figures: dict[str, float]) -> list[str]:
    """One line per target of issue 9: the figure, the target and whether it was met."""
    return [
        verdict(label, figures[key], bound, at_most, shape)
        for label, key, bound, at_most, shape in TARGETS
        if key in figures
    ]


ONE_USER = {"1 caller": (1, 1), "8 callers": (1, 8), "32 callers (4 procs)": (4, 8)}
MANY_USERS = {"1 caller": (1, 1), "64 callers (4 procs)": (4, 16)}
MIXED = "mixed meter+RunLog, 64 users, 64 callers"
METER = {"8 callers": (1, 8), "64 callers (4 procs)": (4, 16)}


def queue_labels(
    who: str, shapes: dict[str, tuple[int, int]], what: str = "queue call()"
) -> list[str]:
    """The queue rows' labels for ``who`` (``one user``, ``64 users``), one per caller shape."""
    return [f"{what}, {who}, {name}" for name in shapes]


def best_rate(
    results: dict[str, dict[str, float]],
    who: str,
    shapes: dict[str, tuple[int, int]],
    what: str = "queue call()",
) -> float | None:
    """The best calls/s of ``who``'s queue rows that ran, or None when none did."""
    labels = queue_labels(who, shapes, what)
    rates = [results[label]["per_s"] for label in labels if label in results]
    return max(rates) if rates else None


def one_round(
    seconds: float, runs: Callable[[str], bool], one: str, many: list[str], *, celery: bool
) -> dict[str, dict[str, float]]:
    """Every row once, pgbench first: the ratios of a round use that round's baselines."""
    from django.conf import settings

    results: dict[str, dict[str, float]] = {}
    tps_one = pgbench(seconds, clients=1, keys=1)
    tps_many = pgbench(seconds, clients=8, keys=64)
    results["pgbench 1"] = {"per_s": tps_one}
    results["pgbench 8"] = {"per_s": tps_many}
    print(f"{'pgbench single-row upsert, 1 client':46} {tps_one:8.0f} tps")
    print(f"{'pgbench upsert, 8 clients over 64 rows':46} {tps_many:8.0f} tps")

    settings.KODY_ACTORS_INLINE = True
    raw = raw_sql(one)  # the round's raw rows share it: a backend per thread that calls it
    for label, fn, threads in (
        ("raw SQL from Python, 1 caller", raw, 1),
        ("inline actor call (no queue), 1 caller", meter_call([one]), 1),
    ):
        if runs(label):
            results[label] = closed_loop(fn, threads, seconds)
            print(row(label, results[label]))

    paired = "raw SQL and inline call, interleaved"
    if runs(paired):
        # The target's two rows again, one call of each in turn: both meet the same moments
        # of the host, which the rows above, a few seconds apart, do not.
        results["paired raw"], results["paired inline"] = interleaved(
            raw, meter_call([one]), seconds
        )
        print(row("  raw SQL, interleaved with the inline call", results["paired raw"]))
        print(row("  inline call, interleaved with raw SQL", results["paired inline"]))
        # The pair again with raw SQL on the inline call's own connection: each call then
        # meets the backend the other one just used, as in the rows run one after the other.
        results["beside raw"], results["beside inline"] = interleaved(
            raw_sql_beside_inline(one), meter_call([one]), seconds
        )
        print(row("  raw SQL on the inline call's backend", results["beside raw"]))
        print(row("  inline call, interleaved with that", results["beside inline"]))
        # The control: raw SQL against raw SQL, each on a backend of its own (the raw row's
        # and a second). Neither runs any kernel code; what they gain over the raw row is
        # what taking turns between two backends does to a call on this host.
        results["turns raw 1"], results["turns raw 2"] = interleaved(raw, raw_sql(one), seconds)
        print(row("  raw SQL, two backends in turn (1st)", results["turns raw 1"]))
        print(row("  raw SQL, two backends in turn (2nd)", results["turns raw 2"]))

    settings.KODY_ACTORS_INLINE = False
    celery_rows = [f"one Celery task per call, {threads} caller(s)" for threads in (1, 8)]
    if celery and any(runs(label) for label in celery_rows):
        baseline = celery_worker("bench")
        try:
            celery_task_call()(0)  # warm up and wait for the worker
            for threads, label in zip((1, 8), celery_rows, strict=True):
                if runs(label):
                    results[label] = closed_loop(celery_task_call(), threads, seconds)
                    print(row(label, results[label]))
        finally:
            baseline.terminate()
            baseline.wait(timeout=60)

    with shard_worker():
        meter_call([one])(0)
        # Each share's baseline again, next to its rows (reported beside the target's figure):
        # this host's speed swings by a third within minutes, and the round's first pgbench
        # ran a minute before these rows.
        if any(map(runs, queue_labels("one user", ONE_USER))):
            baseline_next(results, "pgbench 1, next", 1, 1, "the one-user rows", seconds)
        queue_rows(results, runs, seconds, "one user", [one], ONE_USER)
        if any(map(runs, [MIXED, *queue_labels("64 users", MANY_USERS)])):
            baseline_next(results, "pgbench 8, next", 8, 64, "the 64-user rows", seconds)
        queue_rows(results, runs, seconds, "64 users", many, MANY_USERS)
        if runs(MIXED):
            warm = mixed_call(many)
            for index in range(len(many) * 2):  # each user's RunLog tables, charge then write
                warm(index % len(many))
            results[MIXED] = closed_loop_procs(lambda: mixed_call(many), 4, 16, seconds)
            print(row(MIXED, results[MIXED]))
        if any(map(runs, queue_labels("64 users", METER, "meter consume()"))):
            warm = consume_call(many)
            for index in range(len(many)):  # today's counter rows and the cached plans
                warm(index)
        queue_rows(results, runs, seconds, "64 users", many, METER, consume_call)
    return results


def baseline_next(
    results: dict[str, dict[str, float]],
    key: str,
    clients: int,
    keys: int,
    rows: str,
    seconds: float,
) -> None:
    """pgbench again right before ``rows``, as ``results[key]``."""
    results[key] = {"per_s": pgbench(seconds, clients=clients, keys=keys)}
    label = f"pgbench {clients} client{'s' if clients > 1 else ''}, next to {rows}"
    print(f"{label:46} {results[key]['per_s']:8.0f} tps")


def queue_rows(
    results: dict[str, dict[str, float]],
    runs: Callable[[str], bool],
    seconds: float,
    who: str,
    users: list[str],
    shapes: dict[str, tuple[int, int]],
    make: Callable[[list[str]], Callable[[int], object]] = meter_call,
) -> None:
    """The queue rows for ``users``: one per caller shape (processes, threads each), each
    caller making ``make(users)``'s call (the meter actor's by default)."""
    what = "queue call()" if make is meter_call else "meter consume()"
    labels = queue_labels(who, shapes, what)
    for label, (procs, threads) in zip(labels, shapes.values(), strict=True):
        if runs(label):
            results[label] = closed_loop_procs(lambda: make(users), procs, threads, seconds)
            print(row(label, results[label]))


def figures_of(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """The figures issue 9 sets targets for, from one round's rows (those that ran), each
    share against the round's first pgbench as the issue measured it; and beside them the
    same shares against the pgbench run next to their rows, the inline ratio from the
    interleaved pairs (raw SQL on its own backend, and on the inline call's), and raw SQL
    taking turns between two backends against the raw row (reported, not judged)."""
    tps_one, tps_many = results["pgbench 1"]["per_s"], results["pgbench 8"]["per_s"]
    figures: dict[str, float] = {}
    raw = results.get("raw SQL from Python, 1 caller")
    inline = results.get("inline actor call (no queue), 1 caller")
    if raw and inline:
        figures["inline_vs_raw"] = inline["p50_ms"] / raw["p50_ms"]
    if "paired raw" in results:
        figures["inline_vs_raw_paired"] = (
            results["paired inline"]["p50_ms"] / results["paired raw"]["p50_ms"]
        )
    if "beside raw" in results:
        figures["inline_vs_raw_one_backend"] = (
            results["beside inline"]["p50_ms"] / results["beside raw"]["p50_ms"]
        )
    if "turns raw 1" in results and raw:
        turns = (results["turns raw 1"]["p50_ms"] + results["turns raw 2"]["p50_ms"]) / 2
        figures["raw_in_turns_vs_alone"] = turns / raw["p50_ms"]
    lone = results.get("queue call(), one user, 1 caller")
    if lone:
        figures["lone_p50_ms"] = lone["p50_ms"]
    one_user = best_rate(results, "one user", ONE_USER)
    if one_user is not None:
        figures["one_user_share"] = one_user / tps_one
    many = best_rate(results, "64 users", MANY_USERS)
    if many is not None:
        figures["many_users_share"] = many / tps_many
    if MIXED in results:
        figures["mixed_share"] = results[MIXED]["per_s"] / tps_many
    meter = best_rate(results, "64 users", METER, "meter consume()")
    if meter is not None:
        figures["meter_share"] = meter / tps_many
    if one_user is not None and "pgbench 1, next" in results:
        figures["one_user_share_next"] = one_user / results["pgbench 1, next"]["per_s"]
    if many is not None and "pgbench 8, next" in results:
        figures["many_users_share_next"] = many / results["pgbench 8, next"]["per_s"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every row this many times, pgbench first each time; each round's ratios "
        "use its own baselines, and the median of each figure over the rounds closes",
    )
    parser.add_argument(
        "--rows",
        default="",
        help="comma-separated words; run only the rows whose label holds one of them "
        "(e.g. 'raw,inline,1 caller'); pgbench always runs",
    )
    options = parser.parse_args()
    wanted = [word.strip() for word in options.rows.split(",") if word.strip()]

    def runs(label: str) -> bool:
        return not wanted or any(word in label for word in wanted)

    setup_django()
    from django.conf import settings

    from apps.entitlements.actor import UserMeter
    from kody.actors.topology import worker_processes
    from kody.userschema.schemas import ensure_schema

    seconds = options.seconds
    one, *many = live_account_ids(65, plan="max")  # the consume rows never reach a limit
    for user in [one, *many]:
        ensure_schema(user)
        settings.KODY_ACTORS_INLINE = True
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Kernel actor benchmark ({seconds:g}s per row, {settings.KODY_ACTOR_SHARDS} shards over "
        f"{worker_processes()} worker process(es), batch "
        f"{settings.KODY_ACTOR_BATCH_SIZE}, {os.cpu_count()} CPUs, load average {load})\n"
    )

    rounds = max(1, options.rounds)
    every: list[dict[str, float]] = []
    for index in range(rounds):
        if rounds > 1:
            print(f"\nRound {index + 1} of {rounds}")
        results = one_round(seconds, runs, one, many, celery=index == 0)
        figures = figures_of(results)
        every.append(figures)
        if index == 0 and not wanted:
            print_ratios(results)
        print(f"\nTargets (issue 9), round {index + 1}")
        print("\n".join(verdicts(figures)))
    if rounds > 1:
        median = {
            key: statistics.median(f[key] for f in every)
            for key in every[0]
            if all(key in f for f in every)
        }
        print(f"\nTargets (issue 9), median of {rounds} rounds")
        print("\n".join(verdicts(median)))
        for _, key, bound, at_most, _ in TARGETS:
            if bound is not None and key in median:
                met = sum(meets(f[key], bound, at_most) for f in every)
                print(f"  {key}: met in {met} of {rounds} rounds")
    print(f"\n  load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


def print_ratios(results: dict[str, dict[str, float]]) -> None:
    """The kernel issue's ratios against its own targets, from the first round (issue 9's
    follow in ``Targets``)."""
    raw = results["raw SQL from Python, 1 caller"]
    sync = results["queue call(), one user, 1 caller"]
    best_one = best_rate(results, "one user", ONE_USER)
    assert best_one is not None  # a full run has every row
    tps_one = results["pgbench 1"]["per_s"]
    celery_best = max(results[f"one Celery task per call, {t} caller(s)"]["per_s"] for t in (1, 8))
    print("\nRatios (same run)")
    print(
        f"  sync call p50 / raw SQL p50          {sync['p50_ms'] / raw['p50_ms']:6.2f}x  "
        f"(call p50 {sync['p50_ms']:.2f} ms; target <= 3 ms)"
    )
    print(f"  one-user calls/s                     {best_one:8.0f}   (target >= 1000)")
    print(f"  one-user calls/s / pgbench 1-client  {best_one / tps_one:6.0%}   (target >= 25%)")
    print(f"  one-user calls/s / best Celery task-per-call {best_one / celery_best:6.2f}x")


if __name__ == "__main__":
    main()
