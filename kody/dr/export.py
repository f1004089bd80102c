"""Writing the nightly disaster-recovery export.

Layout in the ``dr_exports`` bucket, one folder per night (the UTC date its window opens on):

    dr-export/v1/<day>/<alias>/<table>/<part>.jsonl.gz   rows as JSON, one per line
    dr-export/v1/<day>/summary.json                        written last: the export is complete

Every table of the ``public`` schema of each database alias (app and audit) is exported
except Django's migration ledger (the schema comes from migrating the restore target to the
recorded state) and sessions (ephemeral). The per-user schemas' registry is one of those
tables; the per-user schemas themselves are recovered from the database's own backups and
hibernation archives, as the runbook says. Rows come from Postgres as ``row_to_json`` in
primary-key order, so two exports of the same data are byte-identical (gzip without a
timestamp) and a restore reads them back with ``json_populate_recordset`` at full fidelity.

The export resumes where it stopped, inside a table too: progress lives in the lane's cursor
(the finished tables, and for the table under way its parts so far and the last primary key
written); a table is read in keyset pages by its primary key, each page its own short read, and
the summary records row counts and checksums of every part. Tables (and pages of a big table)
are read at different moments, so a row may reference one written after its page was read,
and a row inserted behind the cursor while a table is under way waits for the next night; the
restore loads with foreign-key checks deferred and reports, never hides, what does not match.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import connections, transaction

from kody.blobs import bucket, list_prefix

VERSION = 1
BUCKET = "dr_exports"
PREFIX = f"dr-export/v{VERSION}"
SKIPPED_TABLES = {"django_migrations": "schema state", "django_session": "ephemeral"}
PART_ROWS = 5000
# The night's window opens at 00:30 UTC: a run before then still belongs to the previous night.
WINDOW_OPENS = timedelta(minutes=30)

State = dict[str, Any]


def night_of(now: datetime) -> date:
    return (now.astimezone(UTC) - WINDOW_OPENS).date()


def summary_key(day: date) -> str:
    return f"{PREFIX}/{day.isoformat()}/summary.json"


def part_key(day: date, alias: str, table: str, part: int) -> str:
    return f"{PREFIX}/{day.isoformat()}/{alias}/{table}/{part:05d}.jsonl.gz"


def aliases() -> list[str]:
    """Each database alias that is its own database (app, audit), in a fixed order."""
    seen: dict[tuple[str, str], str] = {}
    for alias in sorted(settings.DATABASES, key=lambda a: (a != "default", a)):
        db = connections[alias].settings_dict
        seen.setdefault((str(db.get("HOST", "")), str(db["NAME"])), alias)
    return list(seen.values())


def has_summary(day: date) -> bool:
    return bucket(BUCKET).exists(summary_key(day))


def read_summary(day: date) -> dict[str, Any]:
    with bucket(BUCKET).open(summary_key(day), "rb") as handle:
        return json.loads(handle.read())


def shared_tables(alias: str) -> list[str]:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        return [name for (name,) in cursor.fetchall() if name not in SKIPPED_TABLES]


def _primary_key(alias: str, table: str) -> list[str]:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            """
            SELECT a.attname FROM pg_index i
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
            WHERE i.indrelid = %s::regclass AND i.indisprimary
            ORDER BY array_position(i.indkey, a.attnum)
            """,
            [f'public."{table}"'],
        )
        return [name for (name,) in cursor.fetchall()]


def _columns(keys: list[str], alias: str = "t") -> str:
    return ", ".join(f'{alias}."{key}"' for key in keys)


def _write_part(day: date, alias: str, table: str, part: int, lines: list[str]) -> dict[str, Any]:
    body = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    key = part_key(day, alias, table, part)
    storage = bucket(BUCKET)
    if storage.exists(key):  # a resumed run rewrites a part a crash left behind
        storage.delete(key)
    storage.save(key, ContentFile(body))
    return {"key": key, "rows": len(lines), "sha256": hashlib.sha256(body).hexdigest()}


def export_table(
    day: date,
    alias: str,
    table: str,
    progress: dict[str, Any] | None = None,
    save: Callable[[dict[str, Any]], None] = lambda progress: None,
    out_of_time: Callable[[], bool] = lambda: False,
) -> dict[str, Any] | None:
    """One table in parts of ``PART_ROWS`` rows; the finished entry, or None when time ran
    out first (``progress`` then holds where the next run picks up).

    A table with a primary key is read in keyset pages by that key, one short transaction a
    page: after each part ``save`` records the parts so far and the last key written, so a
    table too big for one run resumes where it stopped instead of starting over. A table
    without one (none of Kody's own) is read whole in one snapshot, in its row-text order.
    """
    progress = progress if progress is not None else {}
    progress.setdefault("parts", [])
    parts: list[dict[str, Any]] = progress["parts"]
    keys = _primary_key(alias, table)
    if not keys:
        if out_of_time():
            return None
        return _export_whole(day, alias, table)
    order = _columns(keys)
    while True:
        if out_of_time():
            return None
        after = progress.get("after")
        where, params = "", []
        if after is not None:
            # The last key written, cast back to the columns' own types by the table's row
            # type, so the comparison is the same order the pages are read in.
            where = (
                f" WHERE ({order}) > (SELECT {_columns(keys, 'k')} FROM"
                f' json_populate_record(NULL::public."{table}", %s::json) k)'
            )
            params = [json.dumps(after)]
        with connections[alias].cursor() as cursor:
            cursor.execute(
                f'SELECT row_to_json(t)::text FROM public."{table}" t{where}'
                f" ORDER BY {order} LIMIT %s",
                [*params, PART_ROWS],
            )
            lines = [row for (row,) in cursor.fetchall()]
        if lines:
            parts.append(_write_part(day, alias, table, len(parts), lines))
            last = json.loads(lines[-1])
            progress["after"] = {key: last[key] for key in keys}
            save(progress)
        if len(lines) < PART_ROWS:
            return {"rows": sum(p["rows"] for p in parts), "parts": parts}


def _export_whole(day: date, alias: str, table: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    connection = connections[alias]
    with transaction.atomic(using=alias):
        cursor = connection.chunked_cursor()
        cursor.execute(f'SELECT row_to_json(t)::text FROM public."{table}" t ORDER BY t::text')
        while rows := cursor.fetchmany(PART_ROWS):
            parts.append(_write_part(day, alias, table, len(parts), [row for (row,) in rows]))
        cursor.close()
    return {"rows": sum(p["rows"] for p in parts), "parts": parts}


def _migrations(alias: str) -> list[list[str]]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
        return [[app, name] for app, name in cursor.fetchall()]


def run(
    now: datetime,
    state: State,
    save: Callable[[State], None],
    out_of_time: Callable[[], bool],
) -> str:
    """Advance tonight's export: ``done`` (a summary exists), ``partial`` (out of time, resume
    next tick) or ``finished`` (this call wrote the summary)."""
    day = night_of(now)
    if has_summary(day):
        return "done"
    if state.get("day") != day.isoformat():
        state = {"day": day.isoformat(), "started_at": now.isoformat(), "tables": {}}
        save(state)
    for alias in aliases():
        for table in shared_tables(alias):
            name = f"{alias}/{table}"
            if name in state["tables"]:
                continue
            # Progress inside the table being exported: its parts so far and the last key.
            current = state.get("current") or {}
            if current.get("table") != name:
                current = {"table": name, "parts": []}

            def keep(progress: dict[str, Any]) -> None:
                state["current"] = progress
                save(state)

            done = export_table(day, alias, table, current, keep, out_of_time)
            if done is None:
                return "partial"
            state["tables"][name] = done
            state.pop("current", None)
            save(state)
    write_summary(day, state, now)
    save({"finished": day.isoformat()})
    return "finished"


def write_summary(day: date, state: State, now: datetime) -> None:
    summary = {
        "version": VERSION,
        "day": day.isoformat(),
        "started_at": state["started_at"],
        "finished_at": now.isoformat(),
        "skipped_tables": SKIPPED_TABLES,
        "migrations": {alias: _migrations(alias) for alias in aliases()},
        "tables": dict(sorted(state["tables"].items())),
    }
    body = json.dumps(summary, indent=1, sort_keys=True).encode()
    storage = bucket(BUCKET)
    if storage.exists(summary_key(day)):
        storage.delete(summary_key(day))
    storage.save(summary_key(day), ContentFile(body))


def complete_nights() -> list[str]:
    """Nights with a summary, oldest first (lists the bucket: an operator command only)."""
    return sorted(
        key.split("/")[2]
        for key in list_prefix(BUCKET, f"{PREFIX}/")
        if key.endswith("/summary.json")
    )
