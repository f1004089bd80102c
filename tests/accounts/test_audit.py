"""audit.record(): hashed identifiers only, checked vocabulary, bounded 180-day pruning."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.accounts.services import audit

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_record_hashes_email_and_ip_and_keeps_no_content() -> None:
    audit.record(
        category="auth",
        action="login",
        result="failure",
        email=" Ada@Example.com ",
        ip="192.0.2.7",
        path="/login",
        reason="mail ada@example.com said no",
    )
    row = AuditEvent.objects.get()
    assert row.email_hash == audit.email_hash("ada@example.com") != "ada@example.com"
    assert row.ip_hash == audit.ip_hash("192.0.2.7")
    stored = " ".join(str(v) for v in AuditEvent.objects.values().get().values())
    assert "ada@example.com" not in stored.lower() and "192.0.2.7" not in stored
    assert row.reason == "mail [email] said no" and row.path == "/login"


def test_hash_is_keyed_not_a_plain_digest() -> None:
    import hashlib

    assert audit.email_hash("a@example.com") != hashlib.sha256(b"a@example.com").hexdigest()


@pytest.mark.parametrize(
    "kwargs", [{"category": "billing", "result": "success"}, {"category": "auth", "result": "ok"}]
)
def test_unknown_vocabulary_is_a_programming_error(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        audit.record(action="x", **kwargs)


def test_long_reasons_are_truncated() -> None:
    audit.record(category="account", action="x", result="failure", reason="y" * 500)
    assert len(AuditEvent.objects.get().reason) == audit.REASON_MAX


def _aged_rows(expired: int, fresh: int) -> None:
    now = timezone.now()
    old = now - timedelta(days=audit.RETENTION_DAYS + 1)
    young = now - timedelta(days=audit.RETENTION_DAYS - 1)
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(category="auth", action="login", result="success", timestamp=old)
            for _ in range(expired)
        ]
        + [
            AuditEvent(category="auth", action="login", result="success", timestamp=young)
            for _ in range(fresh)
        ]
    )


def test_prune_deletes_only_expired_rows_a_batch_at_a_time() -> None:
    _aged_rows(expired=7, fresh=1)
    assert audit.prune_expired(3) == 3
    assert audit.prune_expired(10) == 4
    assert audit.prune_expired(10) == 0
    assert AuditEvent.objects.count() == 1


def test_audit_retention_lane_is_hourly_and_bounded() -> None:
    from kody.lanes import Cadence, registry, run_lane

    declared = registry.get("audit_retention")
    assert declared is not None and declared.cadence is Cadence.HOURLY
    _aged_rows(expired=2500, fresh=3)
    run = run_lane("audit_retention")
    assert run is not None and run.items == 2500 and run.batches == 3
    assert AuditEvent.objects.count() == 3
