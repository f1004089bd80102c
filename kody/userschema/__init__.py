"""Per-user schemas: the registry, compiled DDL, lazy creation and additive upgrades."""

from kody.userschema.actor_models import ActorModel, actor_models, schema_version
from kody.userschema.upgrades import retire_tables, upgrade_step

__all__ = ["ActorModel", "actor_models", "retire_tables", "schema_version", "upgrade_step"]
