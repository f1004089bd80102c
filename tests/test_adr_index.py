"""The ADR index lists every record, once, with a status the index defines."""

from __future__ import annotations

import re
from pathlib import Path

ADR = Path(__file__).resolve().parents[1] / "docs" / "adr"
ROW = re.compile(r"^\| \[(\d{4})\]\(([^)]+)\) \| .+ \| (.+) \|$")


def _rows() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in (ADR / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            number, target, status = match.groups()
            assert number not in rows, f"ADR {number} is listed twice"
            rows[number] = (target, status.strip())
    return rows


def test_every_record_is_in_the_index_and_every_row_points_at_a_record():
    records = {p.name[:4]: p.name for p in ADR.glob("[0-9][0-9][0-9][0-9]-*.md")}
    rows = _rows()
    assert sorted(records) == sorted(rows), (
        f"missing from the index: {sorted(set(records) - set(rows))}; "
        f"rows without a record: {sorted(set(rows) - set(records))}"
    )
    for number, (target, _) in rows.items():
        assert target == records[number], f"ADR {number} row links {target}"


def test_every_status_is_one_the_index_defines():
    for number, (_, status) in _rows().items():
        known = r"Accepted(; amended .+)?|Superseded by \d{4}|Superseded: moved .+"
        assert re.fullmatch(known, status), f"ADR {number}: unknown status {status!r}"
