"""Tables only where used: which actor tables a user schema gets, and when.

Design note. Most users never receive mail or run a job, yet every table in their schema costs
catalog rows, disk and relcache in each backend that touches it (issue 16). So an actor that
declares ``tables`` (its actor models) gets them the first time it runs for a user: the
runtime passes the called actors to ``ensure_schema``, which creates what is missing in its
own transaction (under the owner-row lock) and adds the actor's name to the registry row's
``table_sets``. Everything else — the kernel's own tables and any actor model no actor
claims — is created with the schema, as before.

* A table set is closed over foreign keys, so a set never points at a table it lacks.
* ``table_sets IS NULL`` on a registry row means "every set" (schemas made before this,
  adopted orphans, and every schema while ``KODY_LAZY_ACTOR_TABLES`` is off).
* Upgrades reconcile only the tables a schema has; a set created later is created at the
  current version. Export and deletion ask ``created`` before calling an actor's hooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from kody.userschema.ddl import SchemaDDL

# Actor wire name -> the actor models it uses (declared with ``Actor.tables``).
_declared: dict[str, tuple[type[models.Model], ...]] = {}
_resolved: dict[str, frozenset[str]] | None = None


def declare(actor: str, tables: Iterable[type[models.Model]]) -> None:
    """Called by ``Actor.__init_subclass__`` for an actor with ``tables``."""
    global _resolved
    _declared[actor] = tuple(tables)
    _resolved = None


def enabled() -> bool:
    return bool(getattr(settings, "KODY_LAZY_ACTOR_TABLES", True))


def _closure(start: Iterable[type[models.Model]]) -> frozenset[str]:
    seen: dict[str, type[models.Model]] = {}
    todo = list(start)
    while todo:
        model = todo.pop()
        if model._meta.db_table in seen:
            continue
        seen[model._meta.db_table] = model
        todo.extend(
            field.related_model
            for field in model._meta.concrete_fields
            if field.related_model is not None and not isinstance(field.related_model, str)
        )
    return frozenset(seen)


def sets() -> dict[str, frozenset[str]]:
    """Actor name -> the tables of its set (only actors that declared tables)."""
    global _resolved
    if _resolved is None:
        _resolved = _resolve()
    return _resolved


def _resolve() -> dict[str, frozenset[str]]:
    from kody.userschema.actor_models import actor_models

    known = {model._meta.db_table for model in actor_models()}
    found = {name: _closure(models_) for name, models_ in _declared.items() if models_}
    for name, tables in found.items():
        unknown = tables - known
        if unknown:
            raise ImproperlyConfigured(f"{name}.tables names non-actor tables {sorted(unknown)}")
    return found


def eager_tables() -> frozenset[str]:
    """Tables every schema gets at creation: the kernel's and any no actor claims."""
    from kody.userschema.actor_models import actor_models

    claimed = frozenset().union(*sets().values())
    return frozenset(m._meta.db_table for m in actor_models()) - claimed


def needed(actors: Iterable[str]) -> frozenset[str]:
    """Of these actor names, the ones with a table set of their own."""
    if not enabled():
        return frozenset()
    declared = sets()
    return frozenset(name for name in actors if name in declared)


def tables_of(created: Iterable[str] | None) -> frozenset[str] | None:
    """The tables a schema holds given its registry ``table_sets`` (None: all of them)."""
    if created is None:
        return None
    declared = sets()
    return eager_tables().union(*(declared.get(name, frozenset()) for name in created))


def subset(ddl: SchemaDDL, tables: frozenset[str] | None) -> SchemaDDL:
    if tables is None:
        return ddl
    return SchemaDDL(ddl.version, tuple(t for t in ddl.tables if t.table in tables))


def is_created(created: list[str] | None, actor: str) -> bool:
    """Whether ``actor``'s tables exist in a schema whose registry row says ``created``."""
    return created is None or actor not in sets() or actor in created


def describe() -> dict[str, Any]:
    """For docs and the benchmark: what is eager and what each set holds."""
    return {
        "eager": sorted(eager_tables()),
        "sets": {name: sorted(t) for name, t in sorted(sets().items())},
    }
