"""Helpers for tests that probe what the database itself refuses (not a Python validator)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction


def refuses(create: Callable[[], Any], using: str = "default") -> None:
    """The database itself rejects the row (not a Python-side validator)."""
    with pytest.raises(IntegrityError), transaction.atomic(using=using):
        create()


def raw_sql(statement: str, params: tuple[Any, ...] = ()) -> int:
    """Run raw SQL the way account deletion's batch does: no ORM cascade emulation."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount
