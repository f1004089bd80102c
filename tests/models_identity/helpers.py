from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, transaction


def refuses(create: Callable[[], Any], using: str = "default") -> None:
    """The database itself rejects the row (not a Python-side validator)."""
    with pytest.raises(IntegrityError), transaction.atomic(using=using):
        create()
