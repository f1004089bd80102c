import pytest
from django.db import connections


@pytest.mark.django_db(databases=["default", "audit"])
def test_both_databases_answer_and_pgvector_is_installed():
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None
    with connections["audit"].cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert "_audit" in cursor.fetchone()[0]


def test_healthz_answers(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "audit_database": "ok",
        "broker": "ok",
    }
