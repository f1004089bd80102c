from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction


def _refused(action: Callable[[], Any]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        action()


def _sql(statement: str, params: tuple[Any, ...] = ()) -> int:
    """Run raw SQL the way account deletion's batch does: no ORM cascade emulation."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


@pytest.fixture
def refused() -> Callable[[Callable[[], Any]], None]:
    return _refused


@pytest.fixture
def sql() -> Callable[..., int]:
    return _sql
