"""Celery tasks of the mailbox (ids in, never model instances). The relay of the kernel's
outbox runs them at least once; each is idempotent."""

from __future__ import annotations

from celery import shared_task

from apps.mailbox.services import outbound


@shared_task(name="mailbox.submit_outbound", queue="default", acks_late=True, ignore_result=True)
def submit_outbound(user_id: str, message_id: str) -> None:
    """Hand one outbound message to the provider, at most once (``outbound.submit``)."""
    outbound.submit(user_id, message_id)


@shared_task(
    name="mailbox.record_outbound_result", queue="default", acks_late=True, ignore_result=True
)
def record_outbound_result(user_id: str, message_id: str, result: dict[str, str | None]) -> None:
    """A submission's result whose bounded in-line recording failed; recording is idempotent."""
    outbound.record_result(user_id, message_id, result)
