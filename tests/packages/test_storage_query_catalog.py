"""``storageQuery`` SQL sees its bucket and nothing else: not the names of other buckets'
entries, of the caller's or anyone's schema, of tables — through ``pg_catalog``,
``information_schema``, object-id casts, name probes or SQL run from text. Ordinary queries
over the bucket (CTEs, functions, casts, aggregates) still work."""

from __future__ import annotations

import json

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

LISTINGS = [
    "SELECT nspname FROM pg_namespace",
    "SELECT nspname FROM pg_catalog.pg_namespace",
    "SELECT relname FROM pg_class",
    "SELECT tablename, schemaname FROM pg_tables",
    "TABLE pg_namespace",
    "SELECT table_schema, table_name FROM information_schema.tables",
    "SELECT schema_name FROM information_schema.schemata",
    "SELECT key FROM bucket UNION ALL SELECT relname::text FROM pg_class",
    "SELECT (SELECT string_agg(relname, ',') FROM pg_class) AS names",
    "WITH x AS (SELECT relname FROM pg_class) SELECT * FROM x",
    "SELECT * FROM bucket, (WITH pg_class AS (SELECT 1) SELECT 1) s, pg_class",
    "SELECT i::regclass::text AS t FROM generate_series(1, 100000) i",
    "SELECT i::oid::regnamespace::text AS s FROM generate_series(1, 100000) i",
    "SELECT CAST(i AS pg_catalog.regclass) AS t FROM generate_series(1, 100000) i",
    "SELECT to_regclass('public.users') AS t",
    "SELECT has_table_privilege('public.users', 'select') AS t",
    "SELECT query_to_xml('select relname from pg_class', true, true, '') AS x",
    "SELECT database_to_xml(true, true, '') AS x",
    "SELECT pg_get_viewdef('pg_tables') AS v",
    "SELECT current_setting('search_path') AS s",
    "SELECT obj_description(1259) AS d",
    "SELECT * FROM ts_stat('select to_tsvector(relname) from pg_class')",
    "SELECT (NULL::pg_catalog.pg_class).relname",
    "SELECT nextval('public.users_id_seq') AS n",
    "SELECT brin_summarize_new_values('public.users') AS n",
    "SELECT lo_get(1) AS b",
    "SELECT 1 AS one; SELECT relname FROM pg_class",
]


@pytest.mark.parametrize("sql", LISTINGS)
def test_catalog_names_cannot_be_listed(as_owner, owner, sql):
    as_owner.call("storageSet", storageId="job:mine", key="a", value={"n": 1})
    as_owner.call("storageSet", storageId="job:other-bucket-7c1", key="hidden", value={"n": 2})
    error = as_owner.error("storageQuery", 422, storageId="job:mine", sql=sql)
    assert error["code"] == "storage_query_failed"
    text = json.dumps(error)
    assert "other-bucket-7c1" not in text and "hidden" not in text
    with connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%'")
        schemas = [row[0] for row in cursor.fetchall()]
    # No schema name the SQL did not spell itself comes back (the users' schemas above all).
    assert schemas and not [n for n in schemas if n not in sql and n != "public" and n in text]


def test_ordinary_queries_over_the_bucket_still_work(as_owner):
    for key, value in [("a", {"n": 1, "tags": ["x"]}), ("b", {"n": 2, "tags": ["y", "z"]})]:
        as_owner.call("storageSet", storageId="job:mine", key=key, value=value)
    as_owner.call("storageSet", storageId="job:other", key="c", value={"n": 50})
    sql = (
        "WITH t AS (SELECT key, (value->>'n')::int AS n, value->'tags' AS tags FROM bucket) "
        "SELECT upper(key) AS k, n * 2 AS d, jsonb_array_length(tags) AS c, "
        "coalesce(to_char(n, 'FM00'), '') AS z FROM t WHERE n >= $1 ORDER BY key"
    )
    got = as_owner.call("storageQuery", storageId="job:mine", sql=sql, params=[1])
    assert got["rows"] == [
        {"k": "A", "d": 2, "c": 1, "z": "01"},
        {"k": "B", "d": 4, "c": 2, "z": "02"},
    ]
    total = "SELECT count(*) AS n, sum((value->>'n')::numeric) AS s FROM bucket"
    assert as_owner.call("storageQuery", storageId="job:mine", sql=total)["rows"] == [
        {"n": 2, "s": 3}
    ]
    values = "VALUES (1, 'one'), (2, 'two')"
    assert len(as_owner.call("storageQuery", storageId="job:mine", sql=values)["rows"]) == 2


def test_common_functions_are_not_caught_by_the_signature_rule(as_owner):
    as_owner.call("storageSet", storageId="job:mine", key="a", value={"n": 3})
    sql = (
        "SELECT max(key) AS hi, min((value->>'n')::int) AS lo, int8(min((value->>'n')::int)) AS i, "
        "length(key) AS l, round(avg((value->>'n')::numeric)) AS av, now() IS NOT NULL AS t "
        "FROM bucket GROUP BY key"
    )
    assert as_owner.call("storageQuery", storageId="job:mine", sql=sql)["rows"] == [
        {"hi": "a", "lo": 3, "i": 3, "l": 1, "av": 3, "t": True}
    ]
