"""Repo sessions against plain git, in the same run (issue 36).

For a ``--files``-file package, ``--rounds`` times: ``repoOpenSession``, ``--edits``
``repoEditFiles`` calls (one ``replace`` each, on different files), ``repoCommit`` and
``repoPublishSession`` (checks, push, publish), each timed as a capability call on a real shard
worker. The baseline applies the same edits to a local clone with the ``git`` CLI (write the
file, ``git add``), then ``git commit`` and ``git push`` to a local bare repo. It prints p50/p99
per capability and the ratio of the whole loop (kody / git), with and without publish's checks.

    .venv/bin/python benchmarks/repo_sessions.py [--rounds 3] [--files 200] [--edits 50]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _harness import pct, setup_django, shard_worker


def package_files(username: str, count: int) -> dict[str, str]:
    files = {
        "package.json": json.dumps(
            {
                "name": f"@{username}/bench",
                "exports": {".": "./mod.ts"},
                "kody": {"description": "Benchmark package.", "tags": ["bench"]},
            }
        ),
        "README.md": "# Bench\n\nA benchmark package.\n",
        "mod.ts": "export { v0 } from './lib/f0.ts';\n",
    }
    for n in range(count - len(files)):
        files[f"lib/f{n}.ts"] = f"// file {n}\nexport const v{n}: number = 0;\n"
    return files


def git(*args: str, cwd: Path | None = None) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.test",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.test",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def baseline(files: dict[str, str], edits: int, work: Path) -> float:
    """Open (clone), the same edits, commit, push: seconds."""
    seed = work / "seed"
    seed.mkdir()
    for path, text in files.items():
        (seed / path).parent.mkdir(parents=True, exist_ok=True)
        (seed / path).write_text(text)
    git("init", "-q", "-b", "main", cwd=seed)
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "seed", cwd=seed)
    bare = work / "bare.git"
    git("clone", "-q", "--bare", str(seed), str(bare))
    started = time.perf_counter()
    clone = work / "clone"
    git("clone", "-q", str(bare), str(clone))
    for n in range(edits):
        path = clone / f"lib/f{n}.ts"
        path.write_text(path.read_text().replace("= 0;", "= 1;"))
        git("add", f"lib/f{n}.ts", cwd=clone)
    git("commit", "-q", "-m", "edits", cwd=clone)
    git("push", "-q", "origin", "main", cwd=clone)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--edits", type=int, default=50)
    args = parser.parse_args()
    setup_django()
    from _accounts import live_account_ids

    from apps.accounts.models import User
    from apps.packages.services import packages
    from kody.capabilities.invoke import Context, invoke

    [uid] = live_account_ids(1)
    user = User.objects.get(stable_user_id=uid)
    files = package_files(user.username, args.files)
    ctx = Context(user=user)
    times: dict[str, list[float]] = {
        k: [] for k in ("repoOpenSession", "repoEditFiles", "repoCommit", "repoPublishSession")
    }
    loops, checks_free, plain = [], [], []
    print(f"load {os.getloadavg()[0]:.2f}; {args.files} files, {args.edits} edits")
    with shard_worker(processes=1):
        package_id = packages.save(user, files)["package"]["id"]

        def timed(name: str, **arguments: object) -> object:
            started = time.perf_counter()
            answer = invoke(name, ctx, arguments)
            times[name].append(time.perf_counter() - started)
            return answer

        for r in range(args.rounds):
            started = time.perf_counter()
            sid = timed("repoOpenSession", packageId=package_id)["session"]["id"]
            for n in range(args.edits):
                old, new = ("= 0;", "= 1;") if r % 2 == 0 else ("= 1;", "= 0;")
                edit = {"op": "replace", "path": f"lib/f{n}.ts", "search": old, "replace": new}
                timed("repoEditFiles", sessionId=sid, edits=[edit])
            timed("repoCommit", sessionId=sid, message=f"round {r}")
            before_publish = time.perf_counter()
            result = timed("repoPublishSession", sessionId=sid)
            assert result["status"] == "published", result
            loops.append(time.perf_counter() - started)
            checks_free.append(before_publish - started)
            work = Path(tempfile.mkdtemp(prefix="kody-session-bench-"))
            try:
                plain.append(baseline(files, args.edits, work))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    for name, samples in times.items():
        print(
            f"  {name:22} p50 {pct(samples, 0.5) * 1000:8.1f} ms  p99 "
            f"{pct(samples, 0.99) * 1000:8.1f} ms  (n={len(samples)})"
        )
    loop, base = pct(loops, 0.5), pct(plain, 0.5)
    without = pct(checks_free, 0.5)
    print(
        f"  whole loop p50 {loop * 1000:.0f} ms; git CLI p50 {base * 1000:.0f} ms; "
        f"ratio {loop / base:.1f}x"
    )
    print(
        f"  without publish (open+edits+commit) p50 {without * 1000:.0f} ms; "
        f"ratio {without / base:.1f}x"
    )


if __name__ == "__main__":
    main()
