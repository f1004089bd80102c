"""The design we did not pick, measured for comparison: one Celery task per call."""

from __future__ import annotations

from celery import shared_task
from django.db import connection

UPSERT = (
    "INSERT INTO bench_counters (resource, day, count) VALUES (%s, current_date, 1)"
    " ON CONFLICT (resource, day) DO UPDATE SET count = bench_counters.count + 1 RETURNING count"
)


@shared_task(name="bench.upsert", queue="bench", acks_late=True)
def upsert(key: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(UPSERT, [key])
        return cursor.fetchone()[0]
