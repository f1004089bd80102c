"""Per-user DDL compiled from the actor models, once per process.

Django's schema editor writes the SQL (``collect_sql=True``), so the tables in a user schema
are exactly what the models say — there is no second, hand-written copy to drift. Table names
are unqualified: the statements run with ``search_path`` on the target schema, which is what
makes one compiled script serve every user.

One departure from the stock editor (``ActorSchemaEditor``): no ``varchar_pattern_ops``
``_like`` companion indexes. Django adds one to every varchar/text column that is a primary
key, unique or ``db_index``; it serves only ``LIKE 'prefix%'``, which no actor query needs on
those columns, and each one costs catalog rows and relcache per user (issue 16,
docs/architecture/actor-indexes.md). Schemas from before version 6 lose theirs in an upgrade
step (``kody.userschema.lean``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.apps.registry import Apps
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ModelState

from kody.userschema.actor_models import ActorModel, actor_models, schema_version


@dataclass(frozen=True)
class TableDDL:
    table: str
    create_table: str
    create_extras: tuple[str, ...]
    # Column name -> the statements that add it (the column plus its own index or FK).
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Meta.indexes and Meta.constraints by name -> the statement that adds it.
    named: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SchemaDDL:
    version: int
    tables: tuple[TableDDL, ...]

    @functools.cached_property
    def create_statements(self) -> tuple[str, ...]:
        creates = [table.create_table for table in self.tables]
        extras = [sql for table in self.tables for sql in table.create_extras]
        return (*creates, *extras)

    @functools.cached_property
    def create_script(self) -> str:
        return "\n".join(self.create_statements)


def actor_schema_editor(connection: Any, **options: Any) -> BaseDatabaseSchemaEditor:
    """The schema editor that writes actor DDL: the connection's own, minus ``_like`` indexes."""
    base = connection.SchemaEditorClass
    editor_class = _editor_classes.get(base)
    if editor_class is None:

        def _create_like_index_sql(self: Any, model: Any, field: Any) -> None:
            return None  # no actor query is a prefix LIKE on a key column

        editor_class = type(
            "ActorSchemaEditor", (base,), {"_create_like_index_sql": _create_like_index_sql}
        )
        _editor_classes[base] = editor_class
    return editor_class(connection, **options)


_editor_classes: dict[type, type] = {}


def _collect(alias: str, build: Callable[[BaseDatabaseSchemaEditor], None]) -> list[str]:
    connection = connections[alias]
    connection.ensure_connection()
    with actor_schema_editor(connection, collect_sql=True, atomic=False) as editor:
        build(editor)
    return list(editor.collected_sql)


def _adding(method: str, model: Any, part: Any) -> Callable[[BaseDatabaseSchemaEditor], None]:
    """What the schema editor's ``method`` (``add_field``, ``add_index``, ...) would send to
    add ``part`` to ``model``, as a step for ``_collect``."""

    def step(editor: BaseDatabaseSchemaEditor) -> None:
        getattr(editor, method)(model, part)

    return step


def _split_create(statements: list[str]) -> tuple[str, tuple[str, ...]]:
    creates = [sql for sql in statements if sql.startswith("CREATE TABLE")]
    if len(creates) != 1:
        raise ImproperlyConfigured(f"expected one CREATE TABLE, got {statements!r}")
    return creates[0], tuple(sql for sql in statements if sql is not creates[0])


def _table_ddl(model: type[models.Model], alias: str, with_parts: bool) -> TableDDL:
    create_table, extras = _split_create(_collect(alias, lambda ed: ed.create_model(model)))
    columns: dict[str, tuple[str, ...]] = {}
    named: dict[str, str] = {}
    if with_parts:
        for fld in model._meta.local_concrete_fields:
            if fld.primary_key or fld in model._meta.pk_fields:
                continue
            columns[fld.column] = tuple(_collect(alias, _adding("add_field", model, fld)))
        for index in model._meta.indexes:
            named[index.name] = _collect(alias, _adding("add_index", model, index))[0]
        for constraint in model._meta.constraints:
            sql = _collect(alias, _adding("add_constraint", model, constraint))
            named[constraint.name] = sql[0]
    return TableDDL(model._meta.db_table, create_table, extras, columns, named)


def _historical(models_now: Iterable[type[ActorModel]], version: int) -> list[type[models.Model]]:
    """Render the models as they were at ``version`` into a scratch registry."""
    scratch = Apps(installed_apps=())
    states = []
    for model in models_now:
        if model.actor_version > version:
            continue
        newer = {part for part, added in model.actor_added.items() if added > version}
        state = ModelState.from_model(model)
        state.fields = {
            name: fld
            for name, fld in state.fields.items()
            if name not in newer and (fld.db_column or name) not in newer
        }
        for option in ("indexes", "constraints"):
            state.options[option] = [
                item for item in state.options.get(option, []) if item.name not in newer
            ]
        states.append(state)
    return [state.render(scratch) for state in states]


def _check_no_public_clash(models_now: Iterable[type[ActorModel]]) -> None:
    from django.apps import apps

    public = {model._meta.db_table for model in apps.get_models()}
    clash = sorted(public & {model._meta.db_table for model in models_now})
    if clash:
        # An unqualified name would silently reach the public table outside an actor call.
        raise ImproperlyConfigured(f"actor tables share a name with public tables: {clash}")


@functools.cache
def compile_schema(version: int | None = None, alias: str = DEFAULT_DB_ALIAS) -> SchemaDDL:
    current = schema_version()
    version = current if version is None else version
    if not 1 <= version <= current:
        raise ValueError(f"schema version {version} is outside 1..{current}")
    models_now = actor_models()
    _check_no_public_clash(models_now)
    is_current = version == current
    rendered = list(models_now) if is_current else _historical(models_now, version)
    tables = tuple(_table_ddl(model, alias, with_parts=is_current) for model in rendered)
    return SchemaDDL(version=version, tables=tables)


def compile_models(
    models_list: Iterable[type[models.Model]], alias: str = DEFAULT_DB_ALIAS
) -> SchemaDDL:
    """Compile an arbitrary set of models (benchmarks compare a large set against raw DDL)."""
    tables = tuple(_table_ddl(model, alias, with_parts=False) for model in models_list)
    return SchemaDDL(version=0, tables=tables)
