"""Run records and package jobs, as packages' code needs them.

Running package code (exports, webhooks, keyed invocations) writes run records into the
owner's RunLog, and a publish syncs ``package.json#kody.jobs`` into the job schedule. Both
belong to jobs, an app built on this one (a job's target runs a package export), so jobs
registers the two modules here when it loads (``register``) and packages never imports it.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

_registered: dict[str, Any] = {}


def register(*, runs: Any, package_jobs: Any) -> None:
    _registered.update(runs=runs, package_jobs=package_jobs)


def runs() -> Any:
    """``apps.jobs.services.runs``: ``record``, ``list_runs``, the invocation ledger."""
    return _needed("runs")


def package_jobs() -> Any:
    """``apps.jobs.services.package_jobs``: ``problems`` and ``sync``."""
    return _needed("package_jobs")


def _needed(name: str) -> Any:
    try:
        return _registered[name]
    except KeyError:
        raise ImproperlyConfigured(f"no {name} registered (is apps.jobs installed?)") from None
