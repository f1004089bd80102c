"""Pack the schemas of users idle for N days into archives and drop them (the daily lane
``schema_hibernation`` does the same). Safe to interrupt and run again: each user is one
transaction, and the next call, alarm or export restores a user transparently."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from kody.userschema import spares
from kody.userschema.hibernation import hibernate_schema, idle_users
from kody.userschema.naming import schema_name_for


class Command(BaseCommand):
    help = "Hibernate the per-user schemas of users idle for --idle-days days."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--idle-days",
            type=int,
            default=None,
            help=f"Idle for this many days (default {settings.KODY_HIBERNATE_IDLE_DAYS}).",
        )
        parser.add_argument("--dry-run", action="store_true", help="List, change nothing.")
        parser.add_argument("--batch", type=int, default=500, help="Registry rows read at once.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["idle_days"]
        days = settings.KODY_HIBERNATE_IDLE_DAYS if days is None else days
        if days < 1:
            raise CommandError("--idle-days must be at least 1")
        idle_before = timezone.now().date() - timedelta(days=days)
        candidates: list[str] = []
        while True:
            page = idle_users(
                idle_before, after=candidates[-1] if candidates else "", limit=options["batch"]
            )
            candidates += page
            if len(page) < options["batch"]:
                break
        total = len(candidates)
        if not total:
            self.stdout.write(f"No user schema has been idle since before {idle_before}.")
            if not options["dry_run"]:
                spares.top_up()
            return
        verb = "Would hibernate" if options["dry_run"] else "Hibernating"
        self.stdout.write(f"{verb} {total} user schema(s) idle since before {idle_before}.")
        started = time.monotonic()
        packed = 0
        for done, user_id in enumerate(candidates, 1):
            line = f"[{done}/{total} ({done * 100 // total}%) {schema_name_for(user_id)}]"
            if options["dry_run"]:
                self.stdout.write(f"{line} would hibernate")
                continue
            result = hibernate_schema(user_id, idle_before)
            if result is None:
                self.stdout.write(f"{line} skipped (active, deleting or gone meanwhile)")
                continue
            packed += 1
            self.stdout.write(
                f"{line} {result.tables} tables, {result.rows} rows -> {result.bytes} bytes"
            )
        if not options["dry_run"]:
            elapsed = time.monotonic() - started
            self.stdout.write(f"Hibernated {packed} schema(s) in {elapsed:.1f}s.")
            built = spares.top_up()
            self.stdout.write(f"Spare schemas for restores: {spares.count()} ({built} built).")
