"""Column helpers shared by every app's public-schema models.

The original's text primary keys were random UUID strings and its text ``user_id`` columns
hold the 64-hex stable user id (lowercase SHA-256 of the signup email); these helpers keep
both shapes identical everywhere.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models
from django.utils import timezone

STABLE_USER_ID_LENGTH = 64


def new_id() -> str:
    return str(uuid.uuid4())


def text_id(**kwargs: Any) -> models.CharField:
    kwargs.setdefault("max_length", 64)
    kwargs.setdefault("default", new_id)
    kwargs.setdefault("editable", False)
    return models.CharField(primary_key=True, **kwargs)


def stable_user_id(**kwargs: Any) -> models.CharField:
    return models.CharField(max_length=STABLE_USER_ID_LENGTH, **kwargs)


def created_at() -> models.DateTimeField:
    return models.DateTimeField(default=timezone.now)


def updated_at() -> models.DateTimeField:
    return models.DateTimeField(auto_now=True)


def json_list() -> models.JSONField:
    return models.JSONField(default=list, blank=True)


def json_dict() -> models.JSONField:
    return models.JSONField(default=dict, blank=True)
