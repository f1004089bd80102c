"""What one step of an account deletion did, as recorded on the job row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StepReport:
    step: str
    deleted: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "deleted": self.deleted,
            "updated": self.updated,
            "warnings": self.warnings,
            **({"info": self.info} if self.info else {}),
        }
