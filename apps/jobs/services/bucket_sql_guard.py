"""What ``storageQuery`` SQL may name, checked on Postgres's own parse tree before it runs.

Postgres lets every role read the system catalogs (``pg_catalog``, ``information_schema``)
and no per-role revoke hides them, so the query role alone would still list other schemas',
tables' and buckets' names. The guard therefore refuses, before anything runs:

* any relation but ``bucket`` and the statement's own ``WITH`` names — so no catalog table or
  view (all named ``pg_…``, refused even as a ``WITH`` name so nothing can shadow one), no
  ``information_schema``, nothing schema-qualified;
* functions that read the catalog, probe names, or run SQL given as text: names starting
  ``pg_``, ``has_``, ``to_reg``, anything with ``xml`` in it, ``ts_stat``/``ts_rewrite``,
  ``current_setting``/``set_config``, the ``*_description`` family, sequence and large-object
  functions, and every function that has an overload taking or returning a ``reg*`` object
  id (``regclass``, ``regnamespace``, …) or taking ``cstring``/``internal`` — looked up in
  ``pg_proc``, so a function this list does not name is still caught by its signature;
* casts to an object-id type (``regclass`` turns a number into a table name) or to any
  schema-qualified or ``pg_…`` type (a table's row type);
* more than one statement, anything but a plain ``SELECT``/``VALUES``, ``SELECT INTO`` and
  row locks.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.db import connection
from pglast import ast, parse_sql
from pglast.parser import ParseError
from pglast.visitors import Visitor

OBJECT_ID_TYPES = (
    "oid",
    "regclass",
    "regnamespace",
    "regproc",
    "regprocedure",
    "regoper",
    "regoperator",
    "regtype",
    "regrole",
    "regcollation",
)
DENIED_PREFIXES = ("pg_", "has_", "to_reg", "_pg", "lo_", "binary_upgrade_")
DENIED_NAMES = frozenset(
    {
        "current_setting",
        "set_config",
        "obj_description",
        "col_description",
        "shobj_description",
        "format_type",
        "nextval",
        "currval",
        "setval",
        "lastval",
        "ts_stat",
        "ts_rewrite",
        "row_security_active",
        "current_schemas",
        "current_schema",
        "current_database",
        "current_query",
        "acldefault",
        "makeaclitem",
        "satisfies_hash_partition",
    }
)


class Refused(Exception):
    """The SQL names something outside the bucket; the message says what."""


def check(sql: str) -> None:
    """Raise ``Refused`` unless ``sql`` is one read-only query over ``bucket`` alone."""
    try:
        statements = parse_sql(sql)
    except ParseError as exc:
        raise Refused(f"syntax error: {exc.args[0] if exc.args else exc}") from None
    except RecursionError:
        raise Refused("the statement is nested too deeply") from None
    if len(statements) != 1:
        raise Refused("exactly one SELECT statement is allowed")
    statement = statements[0].stmt
    if not isinstance(statement, ast.SelectStmt):
        raise Refused("only a SELECT (or VALUES) statement is allowed")
    walker = _Walker()
    try:
        walker(statement)
    except RecursionError:
        raise Refused("the statement is nested too deeply") from None
    for node in walker.selects:
        if node.intoClause is not None:
            raise Refused("SELECT INTO is not allowed")
        if node.lockingClause:
            raise Refused("row locks are not allowed")
    allowed = {"bucket"} | walker.ctes
    for name in sorted(walker.ctes):
        if name.startswith("pg_"):
            raise Refused(f"a WITH name may not start with pg_: {name}")
    for schema, name in walker.relations:
        if schema is not None or name not in allowed:
            shown = f"{schema}.{name}" if schema else name
            raise Refused(f"only the bucket can be queried, not {shown}")
    for parts in walker.types:
        last = parts[-1].lower()
        if (
            last in OBJECT_ID_TYPES
            or last.startswith("pg_")
            or (len(parts) > 1 and parts[0].lower() != "pg_catalog")
        ):
            raise Refused(f"the type {'.'.join(parts)} is not allowed")
    for parts in walker.functions:
        name = parts[-1].lower()
        if len(parts) > 1 and parts[0].lower() != "pg_catalog":
            raise Refused(f"the function {'.'.join(parts)} is not allowed")
        if (
            name.startswith(DENIED_PREFIXES)
            or "xml" in name
            or name in DENIED_NAMES
            or name.endswith("_description")
            or name in _object_id_functions()
        ):
            raise Refused(f"the function {name} is not allowed")


class _Walker(Visitor):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.relations: list[tuple[str | None, str]] = []
        self.ctes: set[str] = set()
        self.functions: list[list[str]] = []
        self.types: list[list[str]] = []
        self.selects: list[ast.SelectStmt] = []

    def visit_RangeVar(self, ancestors: Any, node: ast.RangeVar) -> None:  # noqa: N802
        schema = node.catalogname or node.schemaname
        self.relations.append((schema, node.relname))

    def visit_CommonTableExpr(self, ancestors: Any, node: ast.CommonTableExpr) -> None:  # noqa: N802
        self.ctes.add(node.ctename)

    def visit_FuncCall(self, ancestors: Any, node: ast.FuncCall) -> None:  # noqa: N802
        self.functions.append([part.sval for part in node.funcname])

    def visit_TypeName(self, ancestors: Any, node: ast.TypeName) -> None:  # noqa: N802
        self.types.append([part.sval for part in (node.names or ())])

    def visit_SelectStmt(self, ancestors: Any, node: ast.SelectStmt) -> None:  # noqa: N802
        self.selects.append(node)


@lru_cache(maxsize=1)
def _object_id_functions() -> frozenset[str]:
    """Every plain function name with an overload that takes or returns a ``reg*`` object id
    (``regclass`` turns a name into a probe), or takes ``cstring``/``internal`` (type I/O and
    planner support, never for queries). Aggregates (``min(oid)``) are not among them."""
    named = [t for t in OBJECT_ID_TYPES if t != "oid"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p WHERE p.prokind <> 'a'"
            " AND (p.prorettype = ANY(%s::regtype[]::oid[])"
            " OR p.proargtypes::oid[] && %s::regtype[]::oid[])",
            [named, [*named, "cstring", "internal"]],
        )
        return frozenset(row[0] for row in cursor.fetchall())
