"""Before/after of a pass's Python changes in ONE process, blocks in turns (now: the sixth).

    python benchmarks/ab_cpu.py [--blocks 20] [--calls 100]   (calls a block)

The host's speed drifts by tens of percent from one minute (and one process) to the next, more
than the change measured; here both versions run in the same process, switched by swapping the
changed functions back (the *before* versions are main's own at ``BEFORE``, loaded with ``git
show``, so this needs a checkout holding that commit), block after block, and each mode's
thread CPU per call is the median over its blocks. Three paths: a queued call (``execute`` of
one decoded call), an inline ``UserMeter.call``, and a queued 8-call batch. Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _accounts import live_account_ids
from _harness import setup_django
from actors import DAY, LIMIT

BEFORE = "789c8e5"  # main as the sixth pass started


def _module_at(rev: str, path: str, **imports):  # type: ignore[no-untyped-def]
    """The module ``path`` as it was at ``rev`` (``git show``), loaded under its own name
    beside today's, so its functions are the old code itself, not a copy of it. ``imports``:
    modules its own imports resolve to instead of today's (``{"kody.userschema.scope": old}``)
    while its body runs."""
    import subprocess
    import sys
    import types

    from _harness import ROOT

    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    name = f"_before_{rev}_" + path.removesuffix(".py").replace("/", "_")
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:{path}"
    sys.modules[name] = module  # dataclasses look their module up while the body runs
    saved = {each: sys.modules[each] for each in imports}
    sys.modules.update(imports)
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    finally:
        sys.modules.update(saved)
    return module


def before_versions(rev: str = BEFORE):  # type: ignore[no-untyped-def]
    """What this pass changed, as it was at ``rev``: the runtime and the scope module as a
    whole (the sixth pass changed how their functions call each other: the connection is
    handed down, ``_finish`` sends through ``in_one_query``, ``_run_fresh`` and
    ``_run_fresh_batch`` share one body), so ``execute`` is swapped with the old runtime
    bound to the old scope."""
    scope = _module_at(rev, "kody/userschema/scope.py")
    runtime = _module_at(rev, "kody/actors/runtime.py", **{"kody.userschema.scope": scope})
    return {("kody.actors.runtime", "execute"): runtime.execute}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--calls", type=int, default=100, help="calls a block")
    options = parser.parse_args()
    setup_django()
    import importlib

    from django.conf import settings

    from apps.entitlements.actor import UserMeter
    from kody.actors import runtime
    from kody.actors.dispatch import _build, new_key
    from kody.actors.wire import Call
    from kody.userschema.schemas import ensure_schema

    old = before_versions()

    def target(module: str, name: str):  # type: ignore[no-untyped-def]
        owner = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        return owner, attr

    new = {key: getattr(*target(*key)) for key in old}

    def use(versions) -> None:  # type: ignore[no-untyped-def]
        for key, fn in versions.items():
            setattr(*target(*key), fn)

    (user,) = live_account_ids(1)
    ensure_schema(user)
    charge = {"resource": "execute_calls_per_day", "day": DAY, "limit": LIMIT}
    settings.KODY_ACTORS_INLINE = True

    def queued(calls: int):  # type: ignore[no-untyped-def]
        def run() -> None:
            runtime.execute(  # the swapped one: dispatch looks it up per call too
                [
                    Call.decode(
                        _build(UserMeter, user, "consume", (), charge, new_key(), True).encode()
                    )
                    for _ in range(calls)
                ]
            )

        return run

    def inline() -> None:
        UserMeter.call(user, "consume", **charge)

    paths = {"queued, 1 call": (queued(1), 1), "inline call": (inline, 1)}
    paths["queued, 8 calls"] = (queued(8), 8)
    for name, (run, calls) in paths.items():
        samples: dict[str, list[float]] = {"before": [], "after": []}
        batches = max(1, options.calls // calls)  # about --calls calls a block
        for mode in ("before", "after"):
            use(old if mode == "before" else new)
            for _ in range(20):
                run()
        for block in range(options.blocks):
            order = ("before", "after") if block % 2 == 0 else ("after", "before")
            for mode in order:
                use(old if mode == "before" else new)
                started = time.thread_time()
                for _ in range(batches):
                    run()
                samples[mode].append((time.thread_time() - started) / (batches * calls) * 1000)
        use(new)
        before, after = (statistics.median(samples[m]) for m in ("before", "after"))
        pairs = statistics.median(
            a / b for a, b in zip(samples["after"], samples["before"], strict=True)
        )
        print(
            f"{name:16} CPU per call: before {before:.3f} ms, after {after:.3f} ms "
            f"({after / before - 1:+.0%}; median of paired blocks {pairs - 1:+.0%}; "
            f"{options.blocks} blocks of {options.calls} calls each)"
        )


if __name__ == "__main__":
    main()
