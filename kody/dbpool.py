"""Threads whose database connections must not come from the pool.

Web requests, the default worker's tasks and beat borrow connections from a bounded
per-process pool (``DATABASES[...]["OPTIONS"]["pool"]``). A shard consumer is different: it
holds one connection for as long as it owns its shard, so it gains nothing from a pool, and
the kernel counts on closing that connection for real: the recycler closes it to hand the
backend's memory back, and the shard fence names its backend session, which a successor
terminates on takeover. A pooled close would hand the same session straight back.
"""

from __future__ import annotations

from django.db import connections


def without_pool() -> None:
    """From now on this thread's connections (every alias) are opened and closed directly.

    Django keeps one connection wrapper per thread per alias; only this thread's wrappers get a
    settings dict without ``pool``, so the process's other threads keep pooling."""
    for alias in connections:
        wrapper = connections[alias]
        options = wrapper.settings_dict.get("OPTIONS") or {}
        if "pool" not in options:
            continue
        if wrapper.connection is not None:
            wrapper.close()
        wrapper.settings_dict = {
            **wrapper.settings_dict,
            "OPTIONS": {key: value for key, value in options.items() if key != "pool"},
        }
