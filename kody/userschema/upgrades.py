"""Data steps that an additive DDL reconciliation cannot express.

Most schema changes need no step: adding a table, column, index or constraint to an actor
model (and recording it in ``actor_added``) is enough, because upgrades compare each schema
with the models by name. Register a step only to move data, e.g. backfill a new column::

    @upgrade_step(3)
    def backfill_revisions(cursor):
        cursor.execute("UPDATE daily_counters SET revision = count WHERE revision = 0")

A step runs once per schema whose stored version is below its number, after the DDL, inside
the upgrade transaction with ``search_path`` on that schema. It must be idempotent: a crash
retries the whole upgrade.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

StepFunction = Callable[[Any], None]


@dataclass(frozen=True)
class UpgradeStep:
    version: int
    name: str
    run: StepFunction


_steps: dict[str, UpgradeStep] = {}


def upgrade_step(version: int) -> Callable[[StepFunction], StepFunction]:
    def register(fn: StepFunction) -> StepFunction:
        name = f"{fn.__module__}.{fn.__qualname__}"
        _steps[name] = UpgradeStep(version=version, name=name, run=fn)
        return fn

    return register


# Tables an actor model stopped declaring, by name, with the version that retired them.
_retired: dict[str, int] = {}


def retire_tables(version: int, *tables: str) -> None:
    """Retire ``tables`` at ``version``: schemas older than that drop them on upgrade, and a
    restore of an archive older than that skips their rows (nothing reads them any more).
    Called from an app's ``actor/upgrades.py`` when it deletes an actor model; the names are
    frozen history, like ``UNREAD_INDEXES`` below."""
    for table in tables:
        _retired[table] = version
    name = f"{__name__}.retire_tables[{version}:{','.join(tables)}]"

    def drop(cursor: Any) -> None:
        drop_in_schema(cursor, "TABLE", tables)

    _steps[name] = UpgradeStep(version=version, name=name, run=drop)


def drop_in_schema(cursor: Any, kind: str, names: tuple[str, ...]) -> None:
    """``DROP kind`` those of ``names`` the schema being upgraded has, qualified by it: an
    unqualified name would fall through ``search_path`` to ``public``. Lookups by name, no
    catalog scan."""
    cursor.execute(
        "SELECT string_agg(format('%%I.%%I', current_schema(), n), ', ')"
        " FROM unnest(%s::text[]) AS n"
        " WHERE to_regclass(format('%%I.%%I', current_schema(), n)) IS NOT NULL",
        [list(names)],
    )
    present = cursor.fetchone()[0]
    if present:
        cursor.execute(f"DROP {kind} IF EXISTS {present}")


def is_retired(table: str, archived_version: int) -> bool:
    """Whether an archive written at ``archived_version`` holds ``table`` only as history."""
    retired_at = _retired.get(table)
    return retired_at is not None and archived_version < retired_at


def steps_between(old: int, new: int) -> list[UpgradeStep]:
    chosen = [step for step in _steps.values() if old < step.version <= new]
    return sorted(chosen, key=lambda step: (step.version, step.name))


def newest_step() -> int:
    return max((step.version for step in _steps.values()), default=1)


# Version 6 (issue 16): the actor DDL no longer creates Django's ``varchar_pattern_ops``
# ``_like`` companions (``kody.userschema.ddl.actor_schema_editor``), and three indexes that no
# query read left the models (docs/architecture/actor-indexes.md). Older schemas drop them
# here, by their names as versions 1-5 created them: frozen history, not derived from today's
# models. A restore builds from the current DDL, so a restored schema never has them; the step
# still runs for an archive older than 6 and finds nothing.
LEAN_INDEXES = 6
UNREAD_INDEXES = (
    # kernel
    "actor_calls_id_3e9d8c1f_like",
    "actor_alarms_actor_128b0b48_like",
    # UserMeter
    "inbound_delivery_claims_delivery_id_4a3f87b7_like",
    "account_write_leases_token_201ab247_like",
    "inbound_mcp_connection_last_used_client_id_52ba4586_like",
    "user_meter_meta_key_6c95ed39_like",
    # RunLog / JobManager
    "runs_id_87ff1e1c_like",
    "package_invocation_ledger_id_fa071d89_like",
    "workflow_projections_id_8b26ccd2_like",
    "activation_milestones_milestone_33266645_like",
    "job_run_observability_job_id_feb7b3e6_like",
    "package_run_successes_package_id_97871aa7_like",
    "run_log_meta_key_f3c33c09_like",
    "runs_package_ix",
    # Mailbox
    "email_messages_id_03402059_like",
    "email_delivery_events_message_id_3da5756f_like",
    "email_delivery_events_id_a1b957bc_like",
    "email_attachments_message_id_d3273316_like",
    "email_attachments_id_eed4f55b_like",
    "email_threads_id_43e27f1f_like",
    "email_message_retention_retries_message_id_cfe9c718_like",
    "email_message_deletion_tombstones_message_id_734e4655_like",
    "mailbox_meta_key_cce54ddc_like",
    "email_threads_last_ix",
    "email_threads_root_ix",
)


@upgrade_step(LEAN_INDEXES)
def drop_unread_indexes(cursor: Any) -> None:
    """Drop the indexes version 6 stopped creating from the schema being upgraded."""
    drop_in_schema(cursor, "INDEX", UNREAD_INDEXES)
