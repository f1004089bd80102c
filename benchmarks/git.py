"""Kody's git remote against plain git, in the same run (issue 35).

A repo of ``--files`` files (``--mib`` MiB, incompressible) and ``--commits`` commits is
built with ``git fast-import``; then, ``--rounds`` times each:

* push: ``git push`` of the whole history into a fresh bare repo over ``file://`` (baseline)
  vs into a fresh Kody repo over smart HTTP (uvicorn serving ``config.asgi``);
* clone: ``git clone`` of the same history from each.

It prints the medians and the ratios (targets: clone <= 3x, push <= 3x the baseline), and the
p50 of ``packageSave`` (checks, commit, publish) for a ``--package-files``-file package.

    .venv/bin/python benchmarks/git.py [--rounds 3] [--files 1000] [--mib 20] [--commits 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import ROOT, database_url, pct, setup_django

TARGETS = {"clone": 3.0, "push": 3.0}


def fast_import_stream(files: int, mib: int, commits: int) -> bytes:
    """The history as a ``git fast-import`` stream: every file in the first commit, then each
    later commit rewrites a few files."""
    size = max(1, (mib << 20) // files)
    out = []
    mark = 0
    for n in range(commits):
        touched = range(files) if n == 0 else [(n * 7 + k) % files for k in range(5)]
        lines = [
            b"commit refs/heads/main",
            f"committer Bench <bench@example.test> {1_700_000_000 + n} +0000".encode(),
            f"data {len(f'commit {n}')}".encode(),
            f"commit {n}".encode(),
        ]
        if n:
            lines.append(f"from :{mark}".encode())
        for index in touched:
            body = os.urandom(size)
            lines += [
                f"M 100644 inline dir{index % 20}/file{index}.bin".encode(),
                f"data {len(body)}".encode(),
                body,
            ]
        mark = n + 1
        lines.insert(1, f"mark :{mark}".encode())
        out.append(b"\n".join(lines) + b"\n")
    return b"".join(out)


def git(*args: str, cwd: Path | None = None) -> float:
    # Loopback only: no proxy from the environment may sit between git and the server.
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    started = time.perf_counter()
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True)
    if done.returncode:
        raise RuntimeError(f"git {args[0]} failed: {done.stderr.decode()[-2000:]}")
    return time.perf_counter() - started


def start_server(port: int, log: Path) -> subprocess.Popen:
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_DB_CONN_MAX_AGE": "0",
        "KODY_ACTORS_INLINE": "1",
        # Plain HTTP on loopback, as deployed behind a TLS-terminating proxy.
        "KODY_SECURE_SSL_REDIRECT": "0",
    }
    env.pop("KODY_TEST_DB_SUFFIX", None)
    command = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host",
               "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    env["KODY_LOG_LEVEL"] = "INFO"
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"uvicorn did not come up:\n{log.read_text()}")


def verdict(label: str, ratio: float, bound: float) -> str:
    outcome = "met" if ratio <= bound else "MISSED"
    return f"  {label:32} {ratio:6.2f}x   target <= {bound:.0f}x {outcome}"


def package_files(n: int, username: str, round_: int) -> dict[str, str]:
    files = {
        "package.json": (
            f'{{"name": "@{username}/bench", "exports": {{".": "./mod.ts"}},'
            ' "kody": {"description": "benchmark package"}}'
        ),
        "README.md": "# bench\n",
    }
    modules = [f"lib/m{i}.ts" for i in range(n - 3)]
    for i, path in enumerate(modules):
        files[path] = (
            f"export function f{i}(x: number): number {{\n  return x + {i + round_};\n}}\n"
        )
    imports = "".join(f'import {{ f{i} }} from "./lib/m{i}.ts";\n' for i in range(len(modules)))
    total = " + ".join(f"f{i}(x)" for i in range(len(modules))) or "x"
    files["mod.ts"] = (
        imports + f"export function all(x: number): number {{\n  return {total};\n}}\n"
    )
    return files


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--mib", type=int, default=20)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--package-files", type=int, default=50)
    parser.add_argument("--publishes", type=int, default=5)
    args = parser.parse_args()
    setup_django()
    from _accounts import live_account_ids

    from apps.accounts.models import User
    from apps.packages.services import packages, repo_tokens, repos

    [uid] = live_account_ids(1)
    user = User.objects.get(stable_user_id=uid)
    work = Path(tempfile.mkdtemp(prefix="kody-git-bench-"))
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    port_no = port.getsockname()[1]
    port.close()
    server = start_server(port_no, work / "server.log")
    try:
        source_repo = work / "source"
        git("init", "-q", "-b", "main", str(source_repo))
        started = time.perf_counter()
        subprocess.run(
            ["git", "fast-import", "--quiet"],
            cwd=source_repo,
            check=True,
            input=fast_import_stream(args.files, args.mib, args.commits),
        )
        git("checkout", "-q", "main", cwd=source_repo)
        print(
            f"built {args.files} files / {args.mib} MiB / {args.commits} commits "
            f"in {time.perf_counter() - started:.1f}s; load {os.getloadavg()[0]:.2f}"
        )
        times: dict[str, list[float]] = {
            k: [] for k in ("push plain", "push kody", "clone plain", "clone kody")
        }
        for r in range(args.rounds):
            bare = work / f"bare{r}.git"
            git("init", "-q", "--bare", str(bare))
            times["push plain"].append(git("push", "-q", f"file://{bare}", "main", cwd=source_repo))
            _repo, source = repos.create(uid, f"bench-{r}-{os.urandom(3).hex()}")
            _, writer = repo_tokens.mint(source, "write")
            url = f"http://127.0.0.1:{port_no}/git/{source.id}.git"
            header = f"http.extraHeader=Authorization: Bearer {writer}"
            times["push kody"].append(git("-c", header, "push", "-q", url, "main", cwd=source_repo))
            times["clone plain"].append(git("clone", "-q", f"file://{bare}", str(work / f"cp{r}")))
            times["clone kody"].append(git("-c", header, "clone", "-q", url, str(work / f"ck{r}")))
        p50 = {k: statistics.median(v) for k, v in times.items()}
        for k, v in p50.items():
            print(f"  {k:32} {v * 1000:9.0f} ms (median of {args.rounds})")
        print(
            verdict(
                "push: kody / plain file://", p50["push kody"] / p50["push plain"], TARGETS["push"]
            )
        )
        print(
            verdict(
                "clone: kody / plain file://",
                p50["clone kody"] / p50["clone plain"],
                TARGETS["clone"],
            )
        )

        samples = []
        package_id = None
        for r in range(args.publishes + 1):
            files = package_files(args.package_files, user.username, r)
            started = time.perf_counter()
            saved = packages.save(user, files, package_id)
            if r:  # the first save also warms Deno's cache
                samples.append(time.perf_counter() - started)
            package_id = saved["package"]["id"]
        print(
            f"  {'publish p50, ' + str(args.package_files) + '-file package':32} "
            f"{pct(samples, 0.5) * 1000:9.0f} ms   (reported; {len(samples)} saves)"
        )
        pushes = [
            line for line in (work / "server.log").read_text().splitlines() if " push " in line
        ]
        for line in pushes[: args.rounds]:
            print("  server: " + line.split(" push ", 1)[1])
    finally:
        server.terminate()
        server.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
