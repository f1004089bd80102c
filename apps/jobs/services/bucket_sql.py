"""``storageQuery``: read-only SQL over one storage bucket.

The bucket's SQL home is a CTE, ``bucket(key text, value jsonb)``, built from the bucket's
rows, which the owner's StorageRunner reads and hands over as one JSON parameter. The SQL
runs as the role ``kody_bucket_query`` — no privilege on any table, so no other bucket, user
schema or public table is reachable — after ``bucket_sql_guard`` has refused, on Postgres's own
parse tree, anything that would read the system catalogs (which every role can read, so other
schemas' and tables' names would otherwise be listable), in a read-only transaction with a
statement timeout, sent with the extended protocol (one statement, never a script), wrapped
as a subquery and capped in rows. The caller's ``params`` are ``$1``…``$n``; the bucket is the
last parameter.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

from apps.jobs.actor.storage import StorageRunner
from apps.jobs.services import bucket_sql_guard
from apps.jobs.services.storage import check_storage_id
from kody.errors import InvalidInput

MAX_ROWS = 1000
MAX_BUCKET_ENTRIES = 10_000
MAX_PARAMS = 20
TIMEOUT_MS = 2000
ROLE = "kody_bucket_query"


class QueryFailed(InvalidInput):
    code = "storage_query_failed"
    message = "The query failed."


def query(user_id: str, storage_id: str, sql: str, params: list[Any] | None = None) -> dict:
    params = list(params or [])
    if len(params) > MAX_PARAMS:
        raise InvalidInput(f"At most {MAX_PARAMS} params.", details={"maxParams": MAX_PARAMS})
    if "\x00" in sql:
        raise InvalidInput("The SQL holds a NUL character.")
    storage_id = check_storage_id(storage_id)
    try:
        bucket_sql_guard.check(sql)
    except bucket_sql_guard.Refused as exc:
        raise QueryFailed(
            f"storageQuery reads only its bucket: {str(exc)[:400]}",
            details={"storageId": storage_id, "reason": "outside_bucket"},
        ) from None
    rows = StorageRunner.call(user_id, "bucket_rows", storage_id, MAX_BUCKET_ENTRIES)
    if len(rows) > MAX_BUCKET_ENTRIES:
        raise InvalidInput(
            f"storageQuery reads buckets of at most {MAX_BUCKET_ENTRIES} entries.",
            details={"maxEntries": MAX_BUCKET_ENTRIES},
        )
    bucket = json.dumps([{"key": k, "value": v} for k, v in rows])
    n = len(params) + 1
    text = (
        f"WITH bucket AS (SELECT t.key, t.value FROM jsonb_to_recordset(${n}::jsonb)"
        f" AS t(key text, value jsonb)) SELECT to_jsonb(q) FROM ({sql}\n) AS q"
        f" LIMIT {MAX_ROWS + 1}"
    )
    try:
        bucket_sql_guard.check(text)  # the statement as sent, wrapper and all
    except bucket_sql_guard.Refused as exc:
        raise QueryFailed(
            f"storageQuery reads only its bucket: {str(exc)[:400]}",
            details={"storageId": storage_id, "reason": "outside_bucket"},
        ) from None
    values = [_text(p) for p in params] + [bucket.encode()]
    try:
        # Everything below is undone on the way out (read-only, the role, the timeout): the
        # block always ends by raising, so it rolls back even when it is a savepoint.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL transaction_read_only = on")
                cursor.execute(f"SET LOCAL statement_timeout = {TIMEOUT_MS}")
                cursor.execute("SET LOCAL search_path = pg_catalog")
                cursor.execute(f"SET LOCAL ROLE {ROLE}")
            result = connection.connection.pgconn.exec_params(text.encode(), values)
            error = (result.error_message or b"").decode("utf-8", "replace").strip()
            rows_out = (
                []
                if error
                else [json.loads(result.get_value(i, 0).decode()) for i in range(result.ntuples)]
            )
            raise _Answered(rows_out, error)
    except _Answered as answered:
        if answered.error:
            raise QueryFailed(
                answered.error.split("\n", 1)[0][:500], details={"storageId": storage_id}
            ) from None
        out = answered.rows
    return {"rows": out[:MAX_ROWS], "truncated": len(out) > MAX_ROWS}


class _Answered(Exception):
    def __init__(self, rows: list[Any], error: str) -> None:
        self.rows, self.error = rows, error


def _text(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, (int, float, str)):
        return str(value).encode()
    return json.dumps(value).encode()
