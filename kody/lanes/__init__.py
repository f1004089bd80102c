"""Scheduled lanes: beat fires ``kody.lanes.dispatch`` every five minutes; each due lane runs
as its own Celery task on the default queue."""

from kody.lanes.registry import Cadence, Lane, all_lanes, due_lanes, is_due, lane, retire
from kody.lanes.runner import LaneRun, LockContention, run_lane

__all__ = [
    "Cadence",
    "Lane",
    "LaneRun",
    "LockContention",
    "all_lanes",
    "due_lanes",
    "is_due",
    "lane",
    "retire",
    "run_lane",
]
