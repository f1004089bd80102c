"""Per-table import rules: what an imported row may not bring with it.

The importer's generic pass (``apps/accounts/export/trust.py``) rewrites owner columns and
refuses rows that name another account. Some rows carry power beyond their owner columns — a
job's grant, a sender address, a KV or blob key — and the app that owns the table says what to
rebuild or refuse. Each app registers its rules in an ``import_rules`` module (found by
``kody.discovery``)::

    @import_rule("jobs")
    def _job(values: dict, ctx: ImportContext) -> dict | None: ...

A rule gets the row's model values (owner columns already rewritten) and returns the values
to write, or ``None`` to leave the row out (after ``ctx.warn`` saying why); it raises
``ImportRefused`` to refuse the whole import. Rules run before anything is written.

This registry sits at the bottom of ``apps.accounts`` (beside the surfaces registry) so the
apps that register rules never import the account lifecycle that runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from kody.errors import KodyError

Rule = Callable[[dict[str, Any], "ImportContext"], "dict[str, Any] | None"]

_RULES: dict[str, Rule] = {}


class ImportRefused(KodyError):
    code = "import_refused"
    status = 400


class ArchiveRows(Protocol):
    def rows(self, table: str) -> list[dict[str, Any]]: ...


def import_rule(table: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        existing = _RULES.get(table)
        if existing is not None and existing is not rule:
            raise ValueError(f"{table} has two import rules")
        _RULES[table] = rule
        return rule

    return register


def rule_for(table: str) -> Rule | None:
    # Discovery imports every app's import_rules module; done at first use, not at import,
    # because the apps' modules import this one.
    from kody.discovery import autodiscover

    autodiscover()
    return _RULES.get(table)


@dataclass
class ImportContext:
    """What a rule may know about the import in progress."""

    archive: ArchiveRows
    old_id: str  # the stable id the archive names (checked: 64 lowercase hex)
    new_id: str  # the imported account's stable id, minted here
    username: str  # the imported account's username here (validated like a signup's)
    old_username: str  # the archive's, which named the account's platform address there
    now: datetime
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def archive_values(self, table: str, column: str) -> set[Any]:
        """Every value of ``column`` in the archive's rows of ``table`` (e.g. its own ids)."""
        return {row.get(column) for row in self.archive.rows(table)} - {None}
