"""Loading a disaster-recovery export into a freshly migrated database.

The target is a new, empty deployment: its databases migrated (``manage.py migrate``) to the
very migration state the export recorded, and no account yet. The restore refuses anything
else, so it can never overwrite a live system. Per database alias, in one transaction: every
exported table is emptied (the rows data migrations seeded are replaced by the export's own),
each part is checked against the summary's checksum and inserted with
``json_populate_recordset`` (foreign keys checked at commit, so table order does not matter),
and identity sequences are moved past the restored ids.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.db import connections, transaction

from kody.blobs import bucket
from kody.dr import export
from kody.errors import KodyError


class RestoreRefused(KodyError):
    code = "dr_restore_refused"
    status = 409
    message = "The disaster-recovery restore was refused."


@dataclass
class Restored:
    day: str
    tables: int = 0
    rows: dict[str, int] = field(default_factory=dict)


def _check_target(alias: str, summary: dict[str, Any]) -> None:
    expected = summary["migrations"].get(alias)
    if expected is None:
        raise RestoreRefused("The export has no database for this alias.", details={"alias": alias})
    current = export._migrations(alias)
    if current != expected:
        missing = sorted({tuple(m) for m in expected} - {tuple(m) for m in current})[:5]
        extra = sorted({tuple(m) for m in current} - {tuple(m) for m in expected})[:5]
        raise RestoreRefused(
            "Migrate the target to the export's migration state first.",
            details={"alias": alias, "missing": missing, "extra": extra},
        )
    if "users" in export.shared_tables(alias):
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM public.users)")
            if cursor.fetchone()[0]:
                raise RestoreRefused(
                    "The target already has accounts; restore only into a new one."
                )


def _read_part(part: dict[str, Any]) -> str:
    with bucket(export.BUCKET).open(part["key"], "rb") as handle:
        body = handle.read()
    if hashlib.sha256(body).hexdigest() != part["sha256"]:
        raise RestoreRefused(
            "An export part does not match its checksum.", details={"key": part["key"]}
        )
    lines = [line for line in gzip.decompress(body).decode().split("\n") if line]
    if len(lines) != part["rows"]:
        raise RestoreRefused(
            "An export part has the wrong row count.", details={"key": part["key"]}
        )
    return "[" + ",".join(lines) + "]"


def _insertable_columns(cursor: Any, table: str) -> list[str]:
    cursor.execute(
        """
        SELECT attname FROM pg_attribute
        WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
        ORDER BY attnum
        """,
        [f'public."{table}"'],
    )
    return [f'"{name}"' for (name,) in cursor.fetchall()]


def _reset_sequences(cursor: Any, table: str) -> None:
    cursor.execute(
        """
        SELECT a.attname, pg_get_serial_sequence(%s, a.attname) FROM pg_attribute a
        WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
        """,
        [f'public."{table}"', f'public."{table}"'],
    )
    for column, sequence in cursor.fetchall():
        if sequence:
            top = f'(SELECT max("{column}") FROM public."{table}")'
            cursor.execute(f"SELECT setval(%s, COALESCE({top}, 0) + 1, false)", [sequence])


def _load_order(cursor: Any, tables: list[str]) -> list[str]:
    """Referenced tables before the tables that reference them (by name otherwise): foreign
    keys Django declares are deferred to commit, but a few are declared immediate."""
    cursor.execute(
        """
        SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
        WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
        """
    )
    needs: dict[str, set[str]] = {t: set() for t in tables}
    for child, parent in cursor.fetchall():
        child, parent = child.strip('"'), parent.strip('"')
        if child in needs and parent in needs and child != parent:
            needs[child].add(parent)
    ordered: list[str] = []
    while needs:
        ready = sorted(t for t, parents in needs.items() if not parents - set(ordered))
        if not ready:  # a cycle: its foreign keys are deferrable, any order works
            ready = sorted(needs)
        for table in ready:
            ordered.append(table)
            del needs[table]
    return ordered


def restore_alias(alias: str, summary: dict[str, Any], result: Restored) -> None:
    _check_target(alias, summary)
    tables = {
        name.split("/", 1)[1]: entry
        for name, entry in summary["tables"].items()
        if name.split("/", 1)[0] == alias
    }
    present = set(export.shared_tables(alias))
    unknown = sorted(set(tables) - present)
    if unknown:
        raise RestoreRefused("The target lacks exported tables.", details={"tables": unknown[:10]})
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        if tables:
            names = ", ".join(f'public."{t}"' for t in sorted(tables))
            cursor.execute(f"TRUNCATE {names} RESTART IDENTITY")
        for table in _load_order(cursor, sorted(tables)):
            entry = tables[table]
            columns = ", ".join(_insertable_columns(cursor, table))
            for part in entry["parts"]:
                cursor.execute(
                    f'INSERT INTO public."{table}" ({columns}) SELECT {columns} '
                    f'FROM json_populate_recordset(NULL::public."{table}", %s::json)',
                    [_read_part(part)],
                )
            _reset_sequences(cursor, table)
            result.rows[f"{alias}/{table}"] = entry["rows"]
            result.tables += 1


def restore(day: date) -> Restored:
    if not export.has_summary(day):
        raise RestoreRefused("No complete export for that night.", details={"day": day.isoformat()})
    summary = export.read_summary(day)
    if summary.get("version") != export.VERSION:
        raise RestoreRefused("Unknown export version.", details={"version": summary.get("version")})
    result = Restored(day=day.isoformat())
    for alias in export.aliases():
        restore_alias(alias, summary, result)
    return result
