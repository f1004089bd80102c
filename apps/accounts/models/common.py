"""Small column helpers shared by the public-schema models of every app."""

from __future__ import annotations

import uuid

from django.db import models

# A stable user id is the lowercase SHA-256 hex of the signup email: always 64 characters.
STABLE_USER_ID_LENGTH = 64


def new_id() -> str:
    """Text primary keys in the original were random UUID strings; keep that shape."""
    return str(uuid.uuid4())


def stable_user_id_field(**kwargs: object) -> models.CharField:
    return models.CharField(max_length=STABLE_USER_ID_LENGTH, **kwargs)  # type: ignore[arg-type]


def text_id_field(**kwargs: object) -> models.CharField:
    kwargs.setdefault("max_length", 64)
    kwargs.setdefault("default", new_id)
    return models.CharField(primary_key=True, editable=False, **kwargs)  # type: ignore[arg-type]
