"""What package code and agents see of the StorageRunner buckets and the run log beside
``execute``: bucket storage (``storage.*`` in the sandbox, ``storageQuery`` read-only SQL)
and bulk run triage."""

from __future__ import annotations

from typing import Any

from apps.jobs.services import runs
from apps.jobs.services import storage as buckets
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema
from kody.errors import InvalidInput

# The schema states the shape ``services.storage.check_storage_id`` enforces.
STORAGE_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 512,
    "pattern": "^" + buckets.STORAGE_ID.pattern + "$",
}
KEY = {"type": "string", "minLength": 1, "maxLength": 512}
MAX_BULK = 100


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


@capability(
    name="storageGet",
    domain="storage",
    title="Read a stored value",
    description="One key of one of your storage buckets (exec:, job:, package:, service: ids).",
    input_schema=_object({"storageId": STORAGE_ID, "key": KEY}, ["storageId", "key"]),
)
def storage_get(ctx: Context, storageId: str, key: str) -> Any:  # noqa: N803
    return buckets.get(ctx.user_id, storageId, key)


@capability(
    name="storageSet",
    domain="storage",
    mutates=True,
    title="Store a value",
    description="Set one key of one of your storage buckets to a JSON value (at most 1 MiB).",
    input_schema=_object(
        # null is not a value to keep: storageDelete removes a key.
        {"storageId": STORAGE_ID, "key": KEY, "value": {"not": {"type": "null"}}},
        ["storageId", "key", "value"],
    ),
)
def storage_set(ctx: Context, storageId: str, key: str, value: Any) -> Any:  # noqa: N803
    return buckets.put(ctx.user_id, storageId, key, value)


@capability(
    name="storageDelete",
    domain="storage",
    mutates=True,
    title="Delete a stored value",
    description="Delete one key of one of your storage buckets.",
    input_schema=_object({"storageId": STORAGE_ID, "key": KEY}, ["storageId", "key"]),
)
def storage_delete(ctx: Context, storageId: str, key: str) -> Any:  # noqa: N803
    return buckets.delete(ctx.user_id, storageId, key)


@capability(
    name="storageList",
    domain="storage",
    title="List stored keys",
    description="Keys of one of your storage buckets, in order, optionally under a prefix.",
    input_schema=_object(
        {
            "storageId": STORAGE_ID,
            "prefix": {"type": "string", "maxLength": 512},
            "cursor": cursor_schema(2048),
            "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        },
        ["storageId"],
    ),
)
def storage_list(
    ctx: Context,
    storageId: str,  # noqa: N803
    prefix: str = "",
    cursor: str | None = None,
    limit: int = 100,
) -> Any:
    try:
        return buckets.list_keys(ctx.user_id, storageId, prefix, cursor, limit)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("That cursor is not one this list gave out.") from None


@capability(
    name="runUpdateBulk",
    domain="runs",
    mutates=True,
    title="Triage many runs",
    description=f"Set the error triage state and note of up to {MAX_BULK} runs at once.",
    input_schema=_object(
        {
            "runIds": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 64},
                "minItems": 1,
                "maxItems": MAX_BULK,
                "uniqueItems": True,
            },
            "errorTriage": {"enum": [*runs.TRIAGE, None]},
            "triageNote": {"type": ["string", "null"], "maxLength": 2000},
        },
        ["runIds"],
    ),
)
def run_update_bulk(
    ctx: Context,
    runIds: list[str],  # noqa: N803
    errorTriage: str | None = None,  # noqa: N803
    triageNote: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    if errorTriage is not None and errorTriage not in runs.TRIAGE:
        raise InvalidInput("Unknown triage state.", details={"errorTriage": errorTriage})
    updated, missing = [], []
    by = ctx.client_id or "account"
    for run_id in runIds:
        try:
            updated.append(
                runs.update_run(ctx.user_id, run_id, triage=errorTriage, note=triageNote, by=by)
            )
        except runs.RunNotFound:
            missing.append(run_id)
    return {"runs": updated, "missing": missing}


@capability(
    name="storageQuery",
    domain="storage",
    title="Query a storage bucket with SQL",
    description=(
        "Read-only SQL over one of your buckets, seen as the table `bucket(key text, value "
        "jsonb)`; nothing else is reachable. `params` are $1…$n. At most 1,000 rows (each row "
        "as a JSON object), 2 s, buckets up to 10,000 entries."
    ),
    input_schema=_object(
        {
            "storageId": STORAGE_ID,
            "sql": {"type": "string", "minLength": 1, "maxLength": 20_000},
            "params": {"type": "array", "maxItems": 20},
        },
        ["storageId", "sql"],
    ),
)
def storage_query(
    ctx: Context,
    storageId: str,  # noqa: N803
    sql: str,
    params: list[Any] | None = None,
) -> Any:
    from apps.jobs.services import bucket_sql

    return bucket_sql.query(ctx.user_id, storageId, sql, params)
