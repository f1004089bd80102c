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


CODEMOD_SLICE_SECONDS = 240


@shared_task(
    name="packages.process_codemod_run", queue="default", acks_late=True, ignore_result=True
)
def process_codemod_run(run_id: str) -> str:
    """Work a codemod run for one slice, then hand the rest to a fresh task; the
    ``codemod_runs`` lane picks up a run whose worker was lost."""
    import time

    from apps.packages.services.codemods import runs

    deadline = time.monotonic() + CODEMOD_SLICE_SECONDS
    run = runs.process(run_id, should_stop=lambda: time.monotonic() > deadline)
    if run.status == runs.RUNNING:
        process_codemod_run.delay(run_id)
    return run.status
