"""The catalog lookups a restore and a hibernation made before and after issue 16's last
round, timed on a kept fleet (``fleet.py --sizes N --build``):

    KODY_TEST_DB_SUFFIX=_fleet_20000 python benchmarks/catalog_queries.py [--repeat 20]

*before*: by namespace alone (no pg_class index serves ``relnamespace``, so a scan of the
whole catalog); *after*: by table name (the ``(relname, relnamespace)`` index)."""

from __future__ import annotations

import argparse
import os
import time

from _harness import pct, setup_django

BEFORE = {
    "identity columns (restore)": (
        "SELECT c.relname, array_agg(a.attname) FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped"
        " AND (a.attidentity <> '' OR pg_get_serial_sequence("
        "   quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname) IS NOT NULL)"
        " GROUP BY c.relname"
    ),
    "tables and columns (hibernate)": (
        "SELECT c.relname, array_agg(a.attname ORDER BY a.attnum) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " WHERE n.nspname = %s AND c.relkind = 'r' GROUP BY c.relname ORDER BY c.relname"
    ),
}
AFTER = (
    "SELECT c.relname, array_agg(a.attname ORDER BY a.attnum) FROM pg_class c"
    " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
    " WHERE c.relname = ANY(%s) AND c.relnamespace = to_regnamespace(%s) AND c.relkind = 'r'"
    " GROUP BY c.relname ORDER BY c.relname"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    setup_django()
    from django.db import connection

    from kody.userschema.actor_models import actor_models

    names = [model._meta.db_table for model in actor_models()]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class")
        rows = cursor.fetchone()[0]
        cursor.execute(
            "SELECT schema_name FROM kody_user_schemas WHERE hibernated_at IS NULL"
            " AND version > 0 ORDER BY user_id LIMIT %s",
            [options.repeat],
        )
        schemas = [row[0] for row in cursor.fetchall()]
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"{rows:,} pg_class rows, {len(schemas)} schemas, load average {load}")
        for label, sql, params in [
            *((f"before: {k}", v, lambda s: [s]) for k, v in BEFORE.items()),
            ("after: by table name (both)", AFTER, lambda s: [names, s]),
        ]:
            samples = []
            for schema in schemas:
                start = time.perf_counter()
                cursor.execute(sql, params(schema))
                cursor.fetchall()
                samples.append(time.perf_counter() - start)
            print(
                f"  {label:40} p50 {pct(samples, 0.5) * 1000:7.2f} ms"
                f"  p99 {pct(samples, 0.99) * 1000:7.2f} ms"
            )


if __name__ == "__main__":
    main()
