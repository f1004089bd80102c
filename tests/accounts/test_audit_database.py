"""audit_events lives only in the ``audit`` database, as AUDIT_DB did."""

from __future__ import annotations

import pytest
from django.db import connections

from apps.accounts.models import AuditEvent
from tests.constraints import refuses

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _tables(alias: str) -> set[str]:
    with connections[alias].cursor() as cursor:
        return set(connections[alias].introspection.table_names(cursor))


def test_migrate_creates_audit_events_only_in_the_audit_database():
    assert "audit_events" in _tables("audit")
    assert "audit_events" not in _tables("default")


def test_the_audit_database_holds_nothing_else():
    assert _tables("audit") - {"audit_events", "django_migrations"} == set()


def test_audit_rows_are_written_to_the_audit_database():
    AuditEvent.objects.create(category="auth", action="login", result="failure", email_hash="h")
    with connections["audit"].cursor() as cursor:
        cursor.execute("SELECT action, result FROM audit_events")
        assert cursor.fetchall() == [("login", "failure")]
    assert AuditEvent.objects.db == "audit"


@pytest.mark.parametrize(
    "fields", [{"category": "billing", "result": "success"}, {"category": "auth", "result": "ok"}]
)
def test_audit_category_and_result_are_checked(fields):
    refuses(lambda: AuditEvent.objects.create(action="login", **fields), using="audit")
