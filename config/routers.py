"""Send the security audit trail to its own database, as the original kept AUDIT_DB apart."""

from __future__ import annotations

from typing import Any


def _is_audit(model: Any) -> bool:
    return getattr(model._meta, "db_table", "") == "audit_events"


class AuditRouter:
    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return "audit" if _is_audit(model) else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return "audit" if _is_audit(model) else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        if _is_audit(obj1) or _is_audit(obj2):
            return _is_audit(obj1) and _is_audit(obj2)
        return None

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool:
        model = hints.get("model")
        if model is not None and _is_audit(model):
            return db == "audit"
        if model_name == "auditevent":
            return db == "audit"
        if hints.get("audit") is not None:
            return db == "audit"
        return db == "default"
