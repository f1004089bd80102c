"""Celery discovers the kernel's tasks through this module."""

from kody.lanes.tasks import dispatch, run

__all__ = ["dispatch", "run"]
