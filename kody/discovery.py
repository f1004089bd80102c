"""Import every module that registers something: the kernel's own, then each app's.

One call, from ``KodyConfig.ready()``: each installed app's ``actor`` package (actor classes
and per-user models), ``lanes``, ``capabilities`` and ``import_rules`` (what an imported
account row may not bring, ``apps.accounts.importing``) modules. A module that fails to import
fails start-up with its own traceback; nothing is skipped quietly and found missing later.
"""

from __future__ import annotations

import importlib

from django.utils.module_loading import autodiscover_modules

KERNEL_MODULES = (
    "kody.actors.models",
    "kody.actors.alarms",
    "kody.actors.lanes",
    "kody.dr.lanes",
    "kody.kv.lanes",
    "kody.outbox.lanes",
    "kody.userschema.lanes",
)
APP_MODULES = ("actor", "lanes", "capabilities", "import_rules")

_done = False


def autodiscover() -> None:
    global _done
    if _done:
        return
    for name in KERNEL_MODULES:
        importlib.import_module(name)
    autodiscover_modules(*APP_MODULES)
    _done = True
