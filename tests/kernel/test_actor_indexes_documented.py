"""Every index a per-user actor table carries is named, with its reader, in
docs/architecture/actor-indexes.md (issue 16: each index costs catalog rows and relcache per
user). Adding an index forces the justification; removing one forces the doc to follow; a row
whose verdict names no reader (or constraint) fails.

Pure Python: the names come from Django's schema editor statements, never from a database."""

from __future__ import annotations

import re
from pathlib import Path

from django.db import connection, models

from kody.userschema.actor_models import actor_models
from kody.userschema.ddl import actor_schema_editor
from kody.userschema.upgrades import LEAN_INDEXES, UNREAD_INDEXES

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture" / "actor-indexes.md"
ROW = re.compile(r"^\| `([A-Za-z0-9_]+)` \|", re.MULTILINE)
# | `name` | columns | reader | verdict |
VERDICT = re.compile(r"^\| `([A-Za-z0-9_]+)` \|.*\| ([^|]*) \|$", re.MULTILINE)
JUSTIFIED = ("used by", "enforces")

# Django asks pg_collation whether a collation is deterministic before it adds a `_like`
# index; without a database we answer for the collations actor models use.
DETERMINISTIC = {"C": True, "POSIX": True}


def _deterministic(name: str) -> bool:
    assert name in DETERMINISTIC, (
        f"collation {name!r} is new to actor models: look it up in pg_collation and add it "
        "to DETERMINISTIC"
    )
    return DETERMINISTIC[name]


def declared_indexes(stock: bool = False) -> dict[str, str]:
    """Index name -> table, for every index the compiled per-user DDL creates (not PKs);
    ``stock``: what Django's own editor would create instead (with ``_like`` companions)."""
    editor = connection.schema_editor() if stock else actor_schema_editor(connection)
    editor._is_collation_deterministic = _deterministic  # type: ignore[method-assign]
    found: dict[str, str] = {}
    for model in actor_models():
        table = model._meta.db_table
        for index in model._meta.indexes:
            found[index.name] = table
        for constraint in model._meta.constraints:
            if isinstance(constraint, models.UniqueConstraint):
                found[constraint.name] = table
        for field in model._meta.local_concrete_fields:
            # db_index=True columns and Postgres's varchar_pattern_ops `_like` companions.
            for statement in editor._field_indexes_sql(model, field):
                found[str(statement.parts["name"]).strip('"')] = table
    return found


def documented() -> list[str]:
    return ROW.findall(DOC.read_text())


def test_every_declared_index_is_documented() -> None:
    missing = sorted(set(declared_indexes()) - set(documented()))
    assert not missing, f"add these to {DOC.name} with their reader: {missing}"


def test_doc_names_only_existing_indexes() -> None:
    stale = sorted(set(documented()) - set(declared_indexes()))
    assert not stale, f"{DOC.name} names indexes no actor model declares: {stale}"


def test_each_index_is_documented_once() -> None:
    names = documented()
    twice = sorted({name for name in names if names.count(name) > 1})
    assert not twice, f"{DOC.name} lists these more than once: {twice}"


def test_every_documented_index_has_a_reader() -> None:
    verdicts = dict(VERDICT.findall(DOC.read_text()))
    assert set(verdicts) == set(documented()), "every row needs four columns"
    unjustified = sorted(
        name for name, verdict in verdicts.items() if not verdict.strip("* ").startswith(JUSTIFIED)
    )
    assert not unjustified, (
        f"no reader and no constraint: drop these from the models (and from existing schemas "
        f"in an upgrade step, kody/userschema/upgrades.py) or name their reader: {unjustified}"
    )


def test_no_like_companions_are_created() -> None:
    assert not [name for name in declared_indexes() if name.endswith("_like")]


def test_existing_schemas_lose_every_like_companion() -> None:
    # The v6 upgrade step drops, by name, each _like index the stock editor gives the models.
    # Tables introduced after version 6 never had _like companions (the compiled DDL never
    # created them), so only the older tables' names are frozen history.
    older = {m._meta.db_table for m in actor_models() if m.actor_version < LEAN_INDEXES}
    stock = {
        name
        for name, table in declared_indexes(stock=True).items()
        if name.endswith("_like") and table in older
    }
    assert stock, "the stock editor should still produce _like indexes: the check is vacuous"
    assert not stock - set(UNREAD_INDEXES), "add these to UNREAD_INDEXES (a new upgrade step)"
    assert not set(UNREAD_INDEXES) & set(declared_indexes()), "dropped yet still declared"


def test_the_inventory_sees_all_kinds() -> None:
    # Guards the introspection itself: a silent empty result would make the checks vacuous.
    names = declared_indexes()
    assert "runs_started_ix" in names  # Meta.indexes
    assert "invocation_ledger_key_uq" in names  # UniqueConstraint
    assert any(n.startswith("email_attachments_message_id_") for n in names)  # db_index=True
