"""Spare schemas: a restore renames a pre-built empty schema instead of running the DDL.

Design note. Rebuilding a user's tables is most of a restore: a dozen CREATE TABLEs
(each with its primary key, TOAST table and indexes) cost ~15-25 ms of catalog writes, against
~1 ms for the registry, archive and COPY work around them (issue 16, benchmarks/README.md). So
a small pool of *spare* schemas — the eager tables (kernel + meter) at the current version,
empty, no owner row — is built ahead of time, off the request path (the hibernation lane and
``manage.py hibernate_schemas`` top it up to ``KODY_SPARE_SCHEMAS``). A restore takes one with
``ALTER SCHEMA … RENAME`` (one catalog row), adds the tables of any other set the user had,
and COPYs the archive in; with none left it builds from the DDL as before.

* Spares are named ``kspare_v<version><fingerprint>_<hex>``: they never match a user
  schema's ``u_`` name, the registry does not list them, and a spare of another version or
  eager DDL is never taken (the next top-up drops it).
* Taking one happens inside the restore's transaction, so a crash or rollback puts it back.
  Concurrent restores do not take the same spare: each tries a transaction-scoped advisory
  lock on the name first, and the rename runs in a plpgsql block that swallows a lost race
  (the spare renamed by someone who committed meanwhile), after which the restore falls back
  to the DDL.
"""

from __future__ import annotations

import functools
import hashlib
import secrets

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from kody.userschema import tablesets
from kody.userschema.actor_models import schema_version
from kody.userschema.ddl import SchemaDDL, compile_schema
from kody.userschema.naming import checked

PREFIX = "kspare_"
# Advisory-lock class for spare names (the two-key form keeps it apart from other users).
LOCK_CLASS = 16016


def _prefix(version: int) -> str:
    """``kspare_v<version><fingerprint>_``: the fingerprint pins the exact eager DDL, so a
    deploy that changes which tables are eager (no version bump) never takes an old spare."""
    return f"{PREFIX}v{version}{_fingerprint(version)}_"


@functools.cache
def _fingerprint(version: int) -> str:
    return hashlib.sha256(_ddl(version).create_script.encode()).hexdigest()[:6]


def _ddl(version: int) -> SchemaDDL:
    return tablesets.subset(compile_schema(version), tablesets.tables_of([]))


def _like(version: int) -> str:
    return _prefix(version).replace("_", r"\_") + "%"


def take_statement(schema: str) -> str:
    """One statement (no parameters, for a pipeline) that renames a spare of the current
    version to ``schema`` if one can be had; afterwards ``schema`` exists or it does not."""
    target = checked(schema)  # u_ + hex: safe to inline
    like = _like(schema_version()).replace("\\", "\\\\")
    return f"""DO $spare$
DECLARE candidate name;
BEGIN
  FOR candidate IN SELECT nspname FROM pg_namespace WHERE nspname LIKE E'{like}' LIMIT 8 LOOP
    CONTINUE WHEN NOT pg_try_advisory_xact_lock({LOCK_CLASS}, hashtext(candidate));
    BEGIN
      EXECUTE format('ALTER SCHEMA %I RENAME TO %I', candidate, '{target}');
      RETURN;
    EXCEPTION WHEN invalid_schema_name OR object_not_in_prerequisite_state
              OR lock_not_available OR internal_error THEN
      NULL;  -- taken by a restore that committed meanwhile: try the next one
    END;
  END LOOP;
END $spare$"""


def count(using: str = DEFAULT_DB_ALIAS) -> int:
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", [_like(schema_version())]
        )
        return int(cursor.fetchone()[0])


def top_up(target: int | None = None, using: str = DEFAULT_DB_ALIAS) -> int:
    """Drop spares of older versions, then build spares until ``target`` (default
    ``KODY_SPARE_SCHEMAS``) exist; one transaction each. Returns how many were built."""
    target = settings.KODY_SPARE_SCHEMAS if target is None else target
    current = _prefix(schema_version())
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s AND nspname NOT LIKE %s",
            [PREFIX.replace("_", r"\_") + "%", _like(schema_version())],
        )
        stale = [row[0] for row in cursor.fetchall()]
    for name in stale:
        with connections[using].cursor() as cursor:
            cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    ddl = _ddl(schema_version())
    built = 0
    for _ in range(max(0, target - count(using))):
        name = current + secrets.token_hex(8)
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute(
                f'CREATE SCHEMA "{name}";\nSET LOCAL search_path = "{name}";\n{ddl.create_script}'
            )
        built += 1
    return built


def drop_all(using: str = DEFAULT_DB_ALIAS) -> int:
    """Drop every spare (any version); for tests and for an operator shrinking the pool."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
            [PREFIX.replace("_", r"\_") + "%"],
        )
        names = [row[0] for row in cursor.fetchall()]
        for name in names:
            cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    return len(names)
