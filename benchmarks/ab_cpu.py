"""Before/after of the fifth pass's Python changes in ONE process, blocks in turns.

    python benchmarks/ab_cpu.py [--blocks 20] [--calls 100]   (calls a block)

The host's speed drifts by tens of percent from one minute (and one process) to the next, more
than the change measured; here both versions run in the same process, switched by swapping the
changed functions back (the *before* versions are copied below from main at 2c80881), block
after block, and each mode's thread CPU per call is the median over its blocks. Three paths:
a queued call (``execute`` of one decoded call), an inline ``UserMeter.call``, and a queued
8-call batch. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from _accounts import live_account_ids
from _harness import setup_django
from actors import DAY, LIMIT


def before_versions():  # type: ignore[no-untyped-def]
    """The functions this pass changed, as they were before it."""
    from django.core.serializers.json import DjangoJSONEncoder
    from django.db import DatabaseError, connections
    from psycopg import ClientCursor, ServerCursor

    from kody.actors import fence
    from kody.actors.runtime import CALL_RECORD_RETENTION, _merged, _prune_clock
    from kody.actors.wire import Call
    from kody.userschema.naming import quoted
    from kody.userschema.scope import _begun

    def dumps(value):  # type: ignore[no-untyped-def]
        return json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))

    def as_off_the_queue(call):  # type: ignore[no-untyped-def]
        return Call.decode(call.encode())

    def record_statements(group, fresh):  # type: ignore[no-untyped-def]
        table = f"{quoted(group.schema)}.actor_calls"
        statements = []
        if fresh:
            rows = ", ".join(["(%s, %s, %s, %s::jsonb, now())"] * len(fresh))
            params = []
            for call, outcome in fresh:
                params += [call.id, call.actor, call.method, outcome.text]
            statements.append(
                (
                    f"INSERT INTO {table} (id, actor, method, outcome, created_at) VALUES {rows}"
                    " ON CONFLICT (id) DO NOTHING",
                    params,
                )
            )
        if _prune_clock.due(group.user_id):
            statements.append(
                (f"DELETE FROM {table} WHERE created_at < now() - %s", [CALL_RECORD_RETENTION])
            )
        return statements

    def finish(writes, using):  # type: ignore[no-untyped-def]
        connection = connections[using]
        guard = fence.guard()
        statements = _merged(writes)
        if guard is not None:
            statements.append(guard)
        if len(connection.atomic_blocks) == 1 and not connection.needs_rollback:
            statements.append(("COMMIT", ()))
        if not statements:
            return
        sql = ";\n".join(text for text, _ in statements)
        params = [param for _, each in statements for param in each]
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
        except DatabaseError as exc:
            fenced = fence.lost(exc)
            if fenced is not None:
                raise fenced from exc
            raise

    def deferred_call(self, execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        pending = self.take()
        if not pending:
            return execute(sql, params, many, context)
        raw = self.connection.connection
        cursor = getattr(context.get("cursor"), "cursor", None)
        plain = isinstance(cursor, ClientCursor) and not isinstance(cursor, ServerCursor)
        try:
            if many or not plain or not isinstance(sql, str):
                with self.connection.wrap_database_errors, raw.cursor() as own:
                    own.execute(";\n".join(pending))
                return execute(sql, params, many, context)
            with _begun(raw, pending) as texts:
                result = execute(";\n".join([*texts, sql]), params, many, context)
        except BaseException as exc:
            self.failed = exc
            raise
        for _ in texts:
            cursor.nextset()
        return result

    return {
        ("kody.actors.wire", "dumps"): dumps,
        ("kody.actors.dispatch", "_as_off_the_queue"): as_off_the_queue,
        ("kody.actors.runtime", "_record_statements"): record_statements,
        ("kody.actors.runtime", "_finish"): finish,
        ("kody.userschema.scope", "DeferredSearchPath.__call__"): deferred_call,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--calls", type=int, default=100, help="calls a block")
    options = parser.parse_args()
    setup_django()
    import importlib

    from django.conf import settings

    from apps.entitlements.actor import UserMeter
    from kody.actors.dispatch import _build, new_key
    from kody.actors.runtime import execute
    from kody.actors.wire import Call
    from kody.userschema.schemas import ensure_schema

    old = before_versions()

    def target(module: str, name: str):  # type: ignore[no-untyped-def]
        owner = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        return owner, attr

    new = {key: getattr(*target(*key)) for key in old}

    def use(versions) -> None:  # type: ignore[no-untyped-def]
        for key, fn in versions.items():
            setattr(*target(*key), fn)

    (user,) = live_account_ids(1)
    ensure_schema(user)
    charge = {"resource": "execute_calls_per_day", "day": DAY, "limit": LIMIT}
    settings.KODY_ACTORS_INLINE = True

    def queued(calls: int):  # type: ignore[no-untyped-def]
        def run() -> None:
            execute(
                [
                    Call.decode(
                        _build(UserMeter, user, "consume", (), charge, new_key(), True).encode()
                    )
                    for _ in range(calls)
                ]
            )

        return run

    def inline() -> None:
        UserMeter.call(user, "consume", **charge)

    paths = {"queued, 1 call": (queued(1), 1), "inline call": (inline, 1)}
    paths["queued, 8 calls"] = (queued(8), 8)
    for name, (run, calls) in paths.items():
        samples: dict[str, list[float]] = {"before": [], "after": []}
        batches = max(1, options.calls // calls)  # about --calls calls a block
        for mode in ("before", "after"):
            use(old if mode == "before" else new)
            for _ in range(20):
                run()
        for block in range(options.blocks):
            order = ("before", "after") if block % 2 == 0 else ("after", "before")
            for mode in order:
                use(old if mode == "before" else new)
                started = time.thread_time()
                for _ in range(batches):
                    run()
                samples[mode].append((time.thread_time() - started) / (batches * calls) * 1000)
        use(new)
        before, after = (statistics.median(samples[m]) for m in ("before", "after"))
        pairs = statistics.median(
            a / b for a, b in zip(samples["after"], samples["before"], strict=True)
        )
        print(
            f"{name:16} CPU per call: before {before:.3f} ms, after {after:.3f} ms "
            f"({after / before - 1:+.0%}; median of paired blocks {pairs - 1:+.0%}; "
            f"{options.blocks} blocks of {options.calls} calls each)"
        )


if __name__ == "__main__":
    main()
