"""Actor models: Django models whose tables live in each user's own schema.

Declare them in ``apps/<app>/actor/models.py`` by subclassing ``ActorModel``. They register in
a registry of their own (``actor_apps``), not Django's global one, so ``makemigrations`` never
records them and ``migrate`` never creates them in ``public``; ``kody.userschema.ddl``
compiles their DDL and applies it per user. Query them with the ORM only inside an actor
method, where ``search_path`` names the user's schema; anywhere else their tables do not
resolve.

History: the model's current shape is the newest version. ``actor_version`` says which schema
version introduced the table, and ``actor_added`` maps a column, index or constraint name to
the version that added it. Together they describe every older version, which is what lets
upgrades stay additive and lets tests and benchmarks build an old schema on purpose.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.apps import apps as django_apps
from django.apps.registry import Apps
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.base import ModelBase

actor_apps = Apps(installed_apps=())


def _app_label_for(module: str) -> str:
    config = django_apps.get_containing_app_config(module)
    if config is None:
        raise ImproperlyConfigured(
            f"actor model module {module} is outside any installed app; set Meta.app_label"
        )
    return config.label


class ActorModelBase(ModelBase):
    def __new__(mcs, name: str, bases: tuple, attrs: dict[str, Any], **kwargs: Any) -> Any:
        meta: Any = attrs.get("Meta")
        if meta is not None and vars(meta).get("abstract", False):
            return super().__new__(mcs, name, bases, attrs, **kwargs)
        meta = meta or type("Meta", (), {})
        if not hasattr(meta, "app_label"):
            meta.app_label = _app_label_for(attrs["__module__"])
        # Migration state renders historical clones into a scratch registry; keep theirs.
        if "apps" not in vars(meta):
            meta.apps = actor_apps
        attrs["Meta"] = meta
        cls = super().__new__(mcs, name, bases, attrs, **kwargs)
        if cls._meta.apps is actor_apps:
            _validate(cls)
        return cls


class ActorModel(models.Model, metaclass=ActorModelBase):
    actor_version: ClassVar[int] = 1
    actor_added: ClassVar[dict[str, int]] = {}

    class Meta:
        abstract = True


def _named_parts(model: type[models.Model]) -> set[str]:
    opts = model._meta
    names = {f.column for f in opts.local_concrete_fields} | {f.name for f in opts.local_fields}
    names |= {index.name for index in opts.indexes}
    names |= {constraint.name for constraint in opts.constraints}
    return names


def _validate(model: type[ActorModel]) -> None:
    label = model._meta.label
    if model.actor_version < 1:
        raise ImproperlyConfigured(f"{label}.actor_version must be >= 1")
    unknown = set(model.actor_added) - _named_parts(model)
    if unknown:
        raise ImproperlyConfigured(f"{label}.actor_added names unknown parts: {sorted(unknown)}")
    for part, version in model.actor_added.items():
        if version <= model.actor_version:
            raise ImproperlyConfigured(
                f"{label}.actor_added[{part!r}] must be newer than the table's actor_version"
            )
    for field in model._meta.local_concrete_fields:
        added_later = field.column in model.actor_added or field.name in model.actor_added
        has_default = (
            field.null or field.has_default() or field.db_default is not models.NOT_PROVIDED
        )
        if added_later and not has_default:
            raise ImproperlyConfigured(
                f"{label}.{field.name} is added by an upgrade, so it needs null=True or a default"
            )
        related = field.related_model
        if (
            related is not None
            and getattr(related, "_meta", None)
            and related._meta.apps is not actor_apps
        ):
            raise ImproperlyConfigured(
                f"{label}.{field.name} points at a public table; actor tables reference only "
                "their own schema"
            )


def actor_models() -> list[type[ActorModel]]:
    from kody.discovery import autodiscover

    autodiscover()
    # A registry without app configs: its models are only listed in all_models.
    found = [model for models_ in actor_apps.all_models.values() for model in models_.values()]
    return sorted(found, key=lambda model: model._meta.db_table)


def schema_version() -> int:
    """The current per-user schema version: the newest version any actor model mentions."""
    from kody.userschema.upgrades import newest_step

    versions = [1, newest_step()]
    for model in actor_models():
        versions.append(model.actor_version)
        versions.extend(model.actor_added.values())
    return max(versions)
