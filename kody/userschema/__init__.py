"""Per-user schemas: the registry, compiled DDL, lazy creation and additive upgrades."""

from kody.userschema.actor_models import ActorModel, actor_models, schema_version
from kody.userschema.upgrades import upgrade_step

__all__ = ["ActorModel", "actor_models", "schema_version", "upgrade_step"]
