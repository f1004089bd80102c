"""Shared pieces of the per-app factories: the two stable ids content rows belong to, and
``make(model, **overrides)`` — the factory registered for ``model``, for tests that walk every
model of an app. Each app's factories live in ``tests/<app>/factories.py``."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import models
from factory.django import DjangoModelFactory


def uid(name: str) -> str:
    """A realistic 64-hex stable user id."""
    return hashlib.sha256(f"{name}@example.com".encode()).hexdigest()


ALICE = uid("alice")
BOB = uid("bob")

_registry: dict[type[models.Model], type[DjangoModelFactory]] = {}


def registers(factory_class: type[DjangoModelFactory]) -> type[DjangoModelFactory]:
    """Class decorator: ``make(Model)`` builds rows with this factory."""
    _registry[factory_class._meta.model] = factory_class
    return factory_class


def make(model: type[models.Model], **overrides: Any) -> Any:
    """A valid, saved row of ``model`` (parents included for child tables)."""
    # The factory modules register themselves on import; importing them here keeps callers
    # from having to know which app's module holds a model's factory.
    from tests.community import factories as _community  # noqa: F401
    from tests.mailbox import factories as _mailbox  # noqa: F401
    from tests.packages import factories as _packages  # noqa: F401

    return _registry[model](**overrides)
