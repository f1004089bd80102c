"""Load a night's disaster-recovery export into this deployment's freshly migrated databases."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kody.dr import export, restore
from kody.errors import KodyError


class Command(BaseCommand):
    help = (
        "Restore the DR export of NIGHT (YYYY-MM-DD) into empty, migrated databases. "
        "--list shows the nights with a complete export."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("night", nargs="?")
        parser.add_argument("--list", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"] or not options["night"]:
            for name in export.complete_nights():
                self.stdout.write(name)
            return
        try:
            night = date.fromisoformat(options["night"])
        except ValueError as exc:
            raise CommandError("NIGHT is a date: YYYY-MM-DD") from exc
        try:
            done = restore.restore(night)
        except KodyError as exc:
            raise CommandError(f"{exc.code}: {exc.message} {exc.details}") from exc
        total = sum(done.rows.values())
        self.stdout.write(f"restored night={done.day} tables={done.tables} rows={total}")
