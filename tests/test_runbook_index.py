"""The runbook index lists every runbook once, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[1] / "docs" / "runbooks"


def test_every_runbook_is_in_the_index():
    files = {p.name for p in RUNBOOKS.glob("*.md") if p.name != "README.md"}
    index = (RUNBOOKS / "README.md").read_text()
    linked = re.findall(r"^\| \[([^\]]+)\]\(\1\) \|", index, flags=re.M)
    assert len(linked) == len(set(linked)), "a runbook is listed twice"
    assert set(linked) == files
