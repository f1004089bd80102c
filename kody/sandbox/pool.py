"""A supervised pool of single-use, sandboxed Deno processes.

Each call gets a process of its own that was started ahead of time (``warm``) and is killed
when the call ends, so no isolate, global or module outlives one call: one user's code can
never observe another's. Starting a Deno process costs ~10–30 ms on this machine, so keeping
a few booted processes per memory cap hides that cost from the caller; a dead warm process is
replaced when it is found.

The process runs with no permissions at all (``--no-prompt`` turns a permission request into
an exception), no remote or npm imports, and a V8 heap cap. ArrayBuffers live outside the
V8 heap, so the host also watches the process's resident memory and kills it past the cap.
The wall clock is the host's: past ``wall_seconds`` the process is killed. The channel is
stdin/stdout JSON lines, one request per line, and only the host answers them (``Bridge``).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kody.errors import KodyError

log = logging.getLogger(__name__)
HARNESS = Path(__file__).with_name("harness.js")
READ_CHUNK = 65536
RSS_BASELINE_MB = 96  # what the Deno runtime itself holds resident, on top of the heap cap
POLL_SECONDS = 0.02
STDERR_KEEP = 4096


class ExecuteTimeout(KodyError):
    code = "execute_timeout"
    status = 422
    message = "The code ran past its time limit and was stopped."


class ExecuteMemory(KodyError):
    code = "execute_memory"
    status = 422
    message = "The code used more memory than its limit and was stopped."


class ExecuteError(KodyError):
    code = "execute_error"
    status = 422
    message = "The code failed."


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 5.0
    memory_mb: int = 128
    max_result_chars: int = 1_000_000
    max_request_bytes: int = 2_000_000  # one bridge request (capability args, fetch body)


@dataclass
class Outcome:
    result: Any
    logs: list[dict[str, str]] = field(default_factory=list)
    duration_ms: int = 0


# A bridge request: ``op`` is "call" or "fetch", ``message`` the request line. It answers the
# value to hand back, or raises ``KodyError`` (answered to the code as a thrown KodyError).
Bridge = Callable[[str, dict[str, Any]], Any]


@functools.cache
def deno_binary() -> str:
    # Resolved once: the wheel's lookup reads sysconfig, which is not safe to first-call from
    # several threads at once (it answered None under the refill threads).
    from deno import find_deno_bin

    return find_deno_bin()


class SandboxPool:
    def __init__(self, warm: int = 2) -> None:
        self.warm = warm
        self._idle: dict[int, deque[subprocess.Popen[bytes]]] = {}
        self._lock = threading.Lock()
        self._scratch = tempfile.mkdtemp(prefix="kody-sandbox-")
        deno_binary()
        self.started = 0  # processes started, for tests and the benchmark

    # -- processes ---------------------------------------------------------------------------

    def _spawn(self, memory_mb: int) -> subprocess.Popen[bytes]:
        command = [
            deno_binary(),
            "run",
            "--no-prompt",
            "--no-remote",
            "--no-npm",
            "--no-config",
            "--no-lock",
            f"--v8-flags=--max-old-space-size={memory_mb}",
            str(HARNESS),
        ]
        # Nothing of the host's environment reaches the process (not that code could read it).
        env = {
            "PATH": "/usr/bin:/bin",
            "DENO_DIR": os.path.join(self._scratch, "deno"),
            "NO_COLOR": "1",
            "DENO_NO_UPDATE_CHECK": "1",
        }
        self.started += 1
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self._scratch,
            start_new_session=True,
        )

    def _take(self, memory_mb: int) -> subprocess.Popen[bytes]:
        with self._lock:
            idle = self._idle.setdefault(memory_mb, deque())
            proc = None
            while idle:
                candidate = idle.popleft()
                if candidate.poll() is None:
                    proc = candidate
                    break
                _reap(candidate)
        # Replace what was taken off the caller's path: fork/exec costs a few ms here.
        threading.Thread(target=self._refill, args=(memory_mb,), daemon=True).start()
        return proc or self._spawn(memory_mb)

    def _refill(self, memory_mb: int) -> None:
        with self._lock:
            missing = self.warm - len(self._idle.setdefault(memory_mb, deque()))
        for _ in range(max(0, missing)):
            fresh = self._spawn(memory_mb)
            with self._lock:
                self._idle[memory_mb].append(fresh)

    def healthy(self) -> int:
        """How many warm processes are alive and waiting."""
        with self._lock:
            return sum(1 for idle in self._idle.values() for p in idle if p.poll() is None)

    def close(self) -> None:
        with self._lock:
            for idle in self._idle.values():
                while idle:
                    _reap(idle.popleft())

    # -- one call ----------------------------------------------------------------------------

    def run(
        self,
        code: str,
        params: Any,
        *,
        bridge: Bridge,
        limits: Limits | None = None,
        storage_id: str | None = None,
        module: bool = False,
    ) -> Outcome:
        """Run ``code`` (an async function expression or a module with a default export;
        ``module`` says it is a finished ES module, e.g. a published bundle) with ``params``."""
        limits = limits or Limits()
        proc = self._take(limits.memory_mb)
        started = time.monotonic()
        try:
            call = _Call(proc, bridge, limits, started + limits.wall_seconds)
            call.send(
                {
                    "op": "run",
                    "nonce": call.nonce,
                    "code": code,
                    "params": params,
                    "storageId": storage_id,
                    "module": module,
                    "maxResultChars": limits.max_result_chars,
                    "maxRequestBytes": limits.max_request_bytes,
                }
            )
            result, logs = call.converse()
        finally:
            # SIGKILL now (nothing more runs), but the wait for the exit — a few ms — is not
            # the caller's: a daemon thread reaps it.
            _kill(proc)
            threading.Thread(target=_reap, args=(proc,), daemon=True).start()
        return Outcome(result, logs, int((time.monotonic() - started) * 1000))


class _Call:
    def __init__(
        self, proc: subprocess.Popen[bytes], bridge: Bridge, limits: Limits, deadline: float
    ) -> None:
        self.proc = proc
        self.bridge = bridge
        self.limits = limits
        self.deadline = deadline
        self.nonce = secrets.token_hex(16)
        self.stderr = b""
        self.raised: dict[
            str, KodyError
        ] = {}  # error code -> the last such error the bridge raised
        assert proc.stdin and proc.stdout and proc.stderr
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        fd = self.proc.stdin.fileno()  # type: ignore[union-attr]
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_WRITE)
            while data:
                self._check_time()
                if not sel.select(POLL_SECONDS):
                    self._check_memory()
                    continue
                try:
                    data = data[os.write(fd, data) :]
                except BrokenPipeError:
                    return  # the process is gone; converse() says why

    def converse(self) -> tuple[Any, list[dict[str, str]]]:
        out, err = self.proc.stdout.fileno(), self.proc.stderr.fileno()  # type: ignore[union-attr]
        buffer = b""
        # A request line carries at most max_request_bytes of body, base64 when it is bytes.
        limit = max(self.limits.max_result_chars, self.limits.max_request_bytes * 4 // 3) + 65536
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            sel.register(err, selectors.EVENT_READ)
            open_fds = {out, err}
            while out in open_fds:
                self._check_time()
                events = sel.select(POLL_SECONDS)
                self._check_memory()
                for key, _ in events:
                    chunk = _read(key.fd)
                    if chunk is None:
                        continue
                    if not chunk:
                        sel.unregister(key.fd)
                        open_fds.discard(key.fd)
                    elif key.fd == err:
                        self.stderr = (self.stderr + chunk)[-STDERR_KEEP:]
                    else:
                        buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    done = self._handle(line)
                    if done is not None:
                        return done
                if len(buffer) > limit:
                    raise ExecuteError(
                        f"The result is larger than {self.limits.max_result_chars} characters."
                    )
        self._ended()
        raise AssertionError("unreachable")

    def _handle(self, line: bytes) -> tuple[Any, list[dict[str, str]]] | None:
        try:
            message = json.loads(line)
        except ValueError:
            raise ExecuteError("The code wrote to the sandbox's channel.") from None
        if not isinstance(message, dict) or message.get("n") != self.nonce:
            raise ExecuteError("The code wrote to the sandbox's channel.")
        op = message.get("op")
        if op == "done":
            return self._finish(message)
        if op in ("call", "fetch"):
            self._answer(op, message)
            return None
        raise ExecuteError("The code wrote to the sandbox's channel.")

    def _answer(self, op: str, message: dict[str, Any]) -> None:
        try:
            reply = {"id": message.get("id"), "ok": True, "value": self.bridge(op, message)}
        except KodyError as exc:
            self.raised[exc.code] = exc
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            reply = {"id": message.get("id"), "ok": False, "error": error}
        self.send({"op": "reply", **reply})

    def _finish(self, message: dict[str, Any]) -> tuple[Any, list[dict[str, str]]]:
        logs = [
            {"level": str(item.get("level", "log")), "message": str(item.get("message", ""))}
            for item in (message.get("logs") or [])[:200]
            if isinstance(item, dict)
        ]
        if message.get("ok"):
            return json.loads(message.get("result") or "null"), logs
        error = message.get("error") or {}
        code = error.get("code")
        if code == "execute_result_too_large":
            raise ExecuteError(
                f"The result is larger than {self.limits.max_result_chars} characters."
            )
        if isinstance(code, str) and code in self.raised:
            # A bridge error the code did not catch keeps its own code, status and details.
            raised = self.raised[code]
            raise KodyError(
                raised.message,
                code=code,
                status=raised.status,
                details={**raised.details, "logs": logs},
            )
        raise ExecuteError(
            f"{error.get('name', 'Error')}: {error.get('message', '')}"[:1000],
            details={
                "name": str(error.get("name", "Error"))[:100],
                "message": str(error.get("message", ""))[:1000],
                "stack": str(error.get("stack", ""))[:2000],
                "logs": logs,
            },
        )

    def _check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise ExecuteTimeout(details={"limitSeconds": self.limits.wall_seconds})

    def _check_memory(self) -> None:
        if _rss_mb(self.proc.pid) > self.limits.memory_mb + RSS_BASELINE_MB:
            raise ExecuteMemory(details={"limitMb": self.limits.memory_mb})

    def _ended(self) -> None:
        self.proc.wait(timeout=5)
        text = self.stderr.decode("utf-8", "replace").lower()
        if "out of memory" in text or "heap limit" in text:
            raise ExecuteMemory(details={"limitMb": self.limits.memory_mb})
        raise ExecuteError("The code ended the sandbox before answering.")


def _read(fd: int) -> bytes | None:
    """A chunk, ``b""`` at end of stream, or None when nothing is there after all."""
    try:
        return os.read(fd, READ_CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            resident_pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 1_048_576


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _reap(proc: subprocess.Popen[bytes]) -> None:
    _kill(proc)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log.error("sandbox process %s did not exit after SIGKILL", proc.pid)


_pool: SandboxPool | None = None
_pool_lock = threading.Lock()


def pool() -> SandboxPool:
    """The process-wide pool (one per web or worker process)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from django.conf import settings

            _pool = SandboxPool(warm=getattr(settings, "KODY_SANDBOX_WARM", 2))
        return _pool
