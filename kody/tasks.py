"""Celery discovers the kernel's tasks through this module."""

from kody.lanes.tasks import dispatch, run
from kody.outbox.tasks import relay_outbox

__all__ = ["dispatch", "relay_outbox", "run"]
