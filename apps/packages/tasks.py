"""Celery tasks of the packages domain (ids in, never model instances)."""

from __future__ import annotations

from celery import shared_task

from apps.packages.services import index_debt


@shared_task(
    name="packages.drain_search_index_debt", queue="default", acks_late=True, ignore_result=True
)
def drain_search_index_debt(user_id: str | None = None) -> int:
    """Write the vectors a user's writes left pending; a repeat finds nothing to do."""
    report = index_debt.drain(user_id=user_id)
    return report.indexed
