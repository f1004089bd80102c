"""New-user schema creation vs the same DDL run raw, and a fleet upgrade of many schemas.

    python benchmarks/schemas.py [--creates 60] [--fleet 1000]

1. Creating a user's schema through kody.userschema (registry row + compiled DDL + owner
   row, one transaction) vs executing the identical DDL raw in one transaction, for the
   current actor tables and for a synthetic set of 25 tables with indexes. The schema
   editor run live per schema (what a per-schema ``migrate`` does at minimum) is shown too.
2. ``manage.py upgrade_user_schemas`` over ``--fleet`` schemas created at version 1.
"""

from __future__ import annotations

import argparse
import io
import secrets
import time
from collections.abc import Callable

from _accounts import live_account_ids
from _harness import pct, setup_django

SYNTHETIC_TABLES = 25


def synthetic_models() -> list[type]:
    from django.apps.registry import Apps
    from django.db import models

    scratch = Apps(installed_apps=())
    made = []
    for n in range(SYNTHETIC_TABLES):
        meta = type(
            "Meta",
            (),
            {
                "apps": scratch,
                "app_label": "bench",
                "db_table": f"bench_table_{n:02d}",
                "indexes": [
                    models.Index(
                        fields=["owner_ref", "created_at"], name=f"bench_{n:02d}_owner_ix"
                    ),
                    models.Index(fields=["status"], name=f"bench_{n:02d}_status_ix"),
                ],
            },
        )
        attrs = {
            "__module__": __name__,
            "Meta": meta,
            "id": models.BigAutoField(primary_key=True),
            "owner_ref": models.CharField(max_length=64),
            "status": models.CharField(max_length=16, default="active"),
            "payload": models.JSONField(default=dict),
            "count": models.IntegerField(default=0),
            "created_at": models.DateTimeField(),
        }
        made.append(type(f"BenchTable{n:02d}", (models.Model,), attrs))
    return made


def timed(fn: Callable[[], object], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def interleaved(contenders: dict[str, Callable[[], object]], times: int) -> dict[str, list[float]]:
    """Round-robin, so catalog growth and machine load hit every contender alike."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(times):
        for name, fn in contenders.items():
            samples[name] += timed(fn, 1)
    return samples


def raw_create(script: str) -> Callable[[], object]:
    import psycopg
    from django.db import connection

    conn = psycopg.connect(**connection.get_connection_params())

    def create() -> None:
        name = f"bench_raw_{secrets.token_hex(8)}"
        with conn.transaction():
            conn.execute(
                f'CREATE SCHEMA "{name}";\nSET LOCAL search_path TO "{name}", public;\n{script}'
            )

    return create


def kernel_create(ddl: object) -> Callable[[], object]:
    from kody.userschema.schemas import create_schema

    accounts: list[str] = []

    def create() -> object:
        if not accounts:  # made in batches, so the timing is (almost only) create_schema
            accounts.extend(live_account_ids(500))
        return create_schema(accounts.pop(), ddl=ddl)

    return create


def editor_create(models_list: list[type]) -> Callable[[], object]:
    from django.db import connection, transaction

    def create() -> None:
        name = f"bench_editor_{secrets.token_hex(8)}"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f'CREATE SCHEMA "{name}"; SET LOCAL search_path TO "{name}", public')
            with connection.schema_editor(atomic=False) as editor:
                for model in models_list:
                    editor.create_model(model)

    return create


def report(label: str, samples: list[float], baseline: list[float] | None = None) -> None:
    p50 = pct(samples, 0.5) * 1000
    line = f"  {label:52} p50 {p50:7.2f} ms  p99 {pct(samples, 0.99) * 1000:7.2f} ms"
    if baseline is not None:
        line += f"   {p50 / (pct(baseline, 0.5) * 1000):5.2f}x raw"
    print(line)


def drop_bench_schemas() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nspname FROM pg_namespace"
            " WHERE nspname LIKE 'bench\\_%' OR nspname LIKE 'u\\_%'"
        )
        names = [row[0] for row in cursor.fetchall()]
        for name in names:  # one per transaction: a schema's tables each take a lock
            cursor.execute(f'DROP SCHEMA "{name}" CASCADE')
        cursor.execute("DELETE FROM kody_user_schemas")


def creation(times: int) -> None:
    from kody.actors.models import ActorOwner
    from kody.userschema.ddl import compile_models, compile_schema

    start = time.perf_counter()
    compile_schema.cache_clear()
    current = compile_schema()
    took_ms = (time.perf_counter() - start) * 1000
    print(f"Compiling the current actor DDL once per process: {took_ms:.1f} ms\n")
    synthetic = synthetic_models()
    big = compile_models([ActorOwner, *synthetic])
    for label, ddl, models_list in (
        (f"current actor tables ({len(current.tables)})", current, None),
        (
            f"synthetic: owner + {SYNTHETIC_TABLES} tables, 2 indexes each",
            big,
            [ActorOwner, *synthetic],
        ),
    ):
        print(f"Schema creation, {label}, {times} schemas each:")
        contenders = {
            "raw DDL in one transaction (psycopg)": raw_create(ddl.create_script),
            "kody.userschema.create_schema": kernel_create(ddl),
        }
        if models_list:
            contenders["schema editor run live per schema (no compile)"] = editor_create(
                models_list
            )
        samples = interleaved(contenders, times)
        raw = samples["raw DDL in one transaction (psycopg)"]
        for name, taken in samples.items():
            report(name, taken, None if taken is raw else raw)
        print()
    drop_bench_schemas()


def fleet(size: int) -> None:
    from django.core.management import call_command

    from kody.userschema.schemas import create_schema

    print(f"Fleet upgrade: {size} schemas created at version 1")
    users = live_account_ids(size)
    started = time.perf_counter()
    for user in users:
        create_schema(user, version=1, table_sets=None)  # every table, as before lazy sets
    made = time.perf_counter() - started
    print(f"  created in {made:.1f}s ({made / size * 1000:.2f} ms per schema)")
    out = io.StringIO()
    started = time.perf_counter()
    call_command("upgrade_user_schemas", stdout=out)
    took = time.perf_counter() - started
    lines = out.getvalue().splitlines()
    for line in [*lines[:3], "  ...", *lines[-3:]]:
        print(f"  | {line}")
    print(f"  upgraded {size} schemas in {took:.1f}s = {took / size * 1000:.2f} ms per schema")
    out = io.StringIO()
    started = time.perf_counter()
    call_command("upgrade_user_schemas", stdout=out)
    print(
        f"  second run: {out.getvalue().strip()} ({(time.perf_counter() - started) * 1000:.0f} ms)"
    )
    started = time.perf_counter()
    drop_bench_schemas()
    print(f"  dropped them in {time.perf_counter() - started:.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--creates", type=int, default=60)
    parser.add_argument("--fleet", type=int, default=1000)
    options = parser.parse_args()
    setup_django()
    drop_bench_schemas()
    creation(options.creates)
    fleet(options.fleet)


if __name__ == "__main__":
    main()
