"""The disaster-recovery lanes: ``dr_export`` through the night, and its morning watchdog."""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

from kody.dr import export
from kody.lanes import Cadence, LaneRun, lane

log = logging.getLogger("kody.dr")


class DrExportMissing(Exception):
    """Tonight's export summary is missing at the watchdog's hour."""


def _state(run: LaneRun) -> export.State:
    try:
        found = json.loads(run.cursor or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


@lane("dr_export", cadence=Cadence.NIGHTLY_WINDOW, budget_seconds=240, batch_size=export.PART_ROWS)
def dr_export(run: LaneRun) -> None:
    """Tonight's export, resumed table by table each tick until the summary is written."""
    before = len(_state(run).get("tables", {}))
    status = export.run(
        timezone.now(),
        _state(run),
        lambda state: run.save_cursor(json.dumps(state, sort_keys=True)),
        run.out_of_time,
    )
    after = _state(run)
    run.record(len(after.get("tables", {})) - before if "tables" in after else 0)
    run.count(status)


@lane("dr_export_watchdog", cadence=Cadence.MORNING_CHECK, budget_seconds=60, batch_size=1)
def dr_export_watchdog(run: LaneRun) -> None:
    """Fail loudly: mail the operators and fail the lane (the health page shows it red)."""
    day = export.night_of(timezone.now())
    run.record(1)
    if export.has_summary(day):
        run.count("present")
        return
    run.count("missing")
    subject = f"[Kody alert] Disaster-recovery export missing for {day.isoformat()}"
    text = (
        f"The nightly disaster-recovery export for {day.isoformat()} has no summary at the "
        "06:15 UTC check. The dr_export lane keeps retrying every 15 minutes; see the lane on "
        "/admin/health/ and docs/runbooks/disaster-recovery.md."
    )
    try:
        import_string(settings.KODY_OPERATOR_ALERT)("kody", subject, text)
    except Exception:
        log.exception("dr_export_watchdog could not mail the operators")
    raise DrExportMissing(day.isoformat())
