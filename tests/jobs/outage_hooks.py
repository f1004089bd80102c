"""Loaded only into the default-queue worker the jobs outage tests start (``--include``), never
into the test process (a capability that kills its process must not reach the suites that
call every capability).

``testOutageProbe`` appends a line to ``log`` when a run starts and when it ends; the run that
finds the log missing kills its own worker (SIGKILL) right after starting: a worker dying
mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from kody.capabilities import Context, capability

INPUT = {
    "type": "object",
    "properties": {"log": {"type": "string"}, "hold": {"type": "number"}},
    "required": ["log"],
    "additionalProperties": False,
}


def _note(log: Path, event: str) -> None:
    with log.open("a") as out:
        out.write(json.dumps({"event": event, "at": time.time(), "pid": os.getpid()}) + "\n")


@capability(
    name="testOutageProbe",
    domain="tests",
    description="Outage tests only: note a run, and die on the first.",
    input_schema=INPUT,
    # Read-only (not keyed in the invocation ledger): a claim delivered twice must still run
    # it once, which only the batch's start (ADR 0026) guarantees.
)
def outage_probe(ctx: Context, log: str, hold: float = 0.2) -> dict[str, Any]:
    path = Path(log)
    first = not path.exists()
    _note(path, "start")
    if first:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(hold)
    _note(path, "end")
    return {"ok": True}
