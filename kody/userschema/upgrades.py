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


def steps_between(old: int, new: int) -> list[UpgradeStep]:
    chosen = [step for step in _steps.values() if old < step.version <= new]
    return sorted(chosen, key=lambda step: (step.version, step.name))


def newest_step() -> int:
    return max((step.version for step in _steps.values()), default=1)
