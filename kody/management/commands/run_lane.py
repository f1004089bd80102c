"""Run one scheduled lane now, in this process (no beat, no worker)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kody.lanes import all_lanes, run_lane


class Command(BaseCommand):
    help = "Run one lane inline and print its metrics line. --list shows every lane."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", nargs="?")
        parser.add_argument("--list", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"] or not options["name"]:
            for lane in all_lanes():
                self.stdout.write(
                    f"{lane.name:40} {lane.cadence.value:10} budget={lane.budget_seconds:g}s "
                    f"batch={lane.batch_size}"
                )
            return
        try:
            run = run_lane(options["name"])
        except Exception as exc:
            raise CommandError(f"lane {options['name']} failed: {exc}") from exc
        if run is None:
            raise CommandError(f"no lane named {options['name']!r}")
        status = "retired (no-op)" if run.lane.retired else "ok"
        self.stdout.write(run.metrics(status))
