"""audit.record(): hashed identifiers only, checked vocabulary, bounded 180-day pruning."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.accounts.services import audit

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_record_hashes_email_and_ip_and_keeps_no_content() -> None:
    audit.record(category="auth", action="login", result="failure", email=" Ada@Example.com ",
                 ip="192.0.2.7", path="/login", reason="mail ada@example.com said no")
    row = AuditEvent.objects.get()
    assert row.email_hash == audit.email_hash("ada@example.com") != "ada@example.com"
    assert row.ip_hash == audit.ip_hash("192.0.2.7")
    stored = " ".join(str(v) for v in AuditEvent.objects.values().get().values())
    assert "ada@example.com" not in stored.lower() and "192.0.2.7" not in stored
    assert row.reason == "mail [email] said no" and row.path == "/login"


def test_hash_is_keyed_not_a_plain_digest() -> None:
    import hashlib

    assert audit.email_hash("a@example.com") != hashlib.sha256(b"a@example.com").hexdigest()


@pytest.mark.parametrize("kwargs", [{"category": "billing", "result": "success"},
                                    {"category": "auth", "result": "ok"}])
def test_unknown_vocabulary_is_a_programming_error(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        audit.record(action="x", **kwargs)


def test_long_reasons_are_truncated() -> None:
    audit.record(category="account", action="x", result="failure", reason="y" * 500)
    assert len(AuditEvent.objects.get().reason) == audit.REASON_MAX


def test_prune_deletes_only_expired_rows_in_batches() -> None:
    now = timezone.now()
    old = now - timedelta(days=audit.RETENTION_DAYS + 1)
    AuditEvent.objects.bulk_create(
        [AuditEvent(category="auth", action="login", result="success", timestamp=old)
         for _ in range(7)]
        + [AuditEvent(category="auth", action="login", result="success",
                      timestamp=now - timedelta(days=audit.RETENTION_DAYS - 1))]
    )
    assert audit.prune(batch_size=3, max_batches=2) == 6
    assert audit.prune(batch_size=3) == 1
    assert AuditEvent.objects.count() == 1
