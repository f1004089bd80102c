"""The relay kick: ``enqueue`` sends it after COMMIT so a message goes out at once."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="kody.outbox.relay", queue="default", ignore_result=True)
def relay_outbox() -> int:
    from kody.outbox.core import relay

    return relay().handled
