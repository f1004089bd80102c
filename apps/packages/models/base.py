"""Field helpers shared by the packages tables."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


def new_id() -> str:
    return str(uuid.uuid4())


def text_id() -> models.CharField:
    """Opaque string primary key, like the original's random UUID ids."""
    return models.CharField(primary_key=True, max_length=64, default=new_id, editable=False)


def user_id_field(**kwargs: object) -> models.CharField:
    """The 64-hex stable user id (never the integer users.id)."""
    return models.CharField(max_length=64, **kwargs)  # type: ignore[arg-type]


def created_at() -> models.DateTimeField:
    return models.DateTimeField(default=timezone.now)


def updated_at() -> models.DateTimeField:
    return models.DateTimeField(auto_now=True)


def json_list() -> models.JSONField:
    return models.JSONField(default=list, blank=True)


def json_dict() -> models.JSONField:
    return models.JSONField(default=dict, blank=True)
