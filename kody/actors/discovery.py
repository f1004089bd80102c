"""Find every actor model and actor class: the kernel's own, then each app's ``actor`` package."""

from __future__ import annotations

import importlib
import importlib.util
import threading

_lock = threading.Lock()
_done = False


def autodiscover() -> None:
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        from django.apps import apps

        importlib.import_module("kody.actors.models")
        importlib.import_module("kody.actors.alarms")
        for config in apps.get_app_configs():
            candidate = f"{config.name}.actor"
            if config.name != "kody" and importlib.util.find_spec(candidate) is not None:
                importlib.import_module(candidate)
        _done = True
