"""Payload bytes of a user's public rows (what storage reconciliation sets in the meter)."""

from __future__ import annotations

import pytest

from apps.entitlements.services import storage
from apps.entitlements.services.usage import record_usage
from tests.packages.factories import McpUserServerInstructionsFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_sql():
    storage.reset_payload_sql_cache()
    yield
    storage.reset_payload_sql_cache()


def test_payload_bytes_grow_with_the_owners_rows_only(owner, outsider):
    assert storage.payload_bytes(owner.stable_user_id) == 0
    McpUserServerInstructionsFactory(user_id=owner.stable_user_id, instructions="x" * 5000)
    mine = storage.payload_bytes(owner.stable_user_id)
    assert mine >= 5000
    assert storage.payload_bytes(outsider.stable_user_id) == 0


def test_telemetry_is_not_payload(owner):
    for _ in range(20):
        record_usage(owner.stable_user_id, "execute", duration_ms=5)
    assert storage.payload_bytes(owner.stable_user_id) == 0


def test_payload_sql_names_only_safe_identifiers():
    with pytest.raises(ValueError):
        storage._ident('users"; DROP TABLE users; --')
    assert "%(uid)s" in storage.payload_sql()
