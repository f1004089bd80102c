"""Bring every user schema to the current version. Safe to interrupt and run again: each
schema upgrades in its own transaction, and a rerun picks up the ones still behind."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from kody.userschema import schema_version
from kody.userschema.models import UserSchema
from kody.userschema.schemas import upgrade_schema


class Command(BaseCommand):
    help = "Upgrade per-user schemas to the current actor schema version."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Show what would change.")
        parser.add_argument("--batch", type=int, default=500, help="Registry rows read at once.")

    def handle(self, *args: Any, **options: Any) -> None:
        target = schema_version()
        stale = UserSchema.objects.filter(version__lt=target)
        # A hibernated schema is upgraded when it is restored (kody.userschema.hibernation).
        asleep = stale.filter(hibernated_at__isnull=False).count()
        if asleep:
            self.stdout.write(f"{asleep} hibernated schema(s) upgrade on restore; skipped.")
        stale = stale.filter(hibernated_at__isnull=True)
        total = stale.count()
        if not total:
            self.stdout.write(f"All user schemas are at version {target}; nothing to upgrade.")
            return
        verb = "Would upgrade" if options["dry_run"] else "Upgrading"
        self.stdout.write(f"{verb} {total} user schema(s) to version {target}.")
        started = time.monotonic()
        done = 0
        last = ""
        while True:
            page = list(
                stale.filter(user_id__gt=last)
                .order_by("user_id")
                .values_list("user_id", flat=True)[: options["batch"]]
            )
            if not page:
                break
            for user_id in page:
                plan = upgrade_schema(user_id, dry_run=options["dry_run"])
                done += 1
                self._progress(done, total, plan, options["dry_run"])
            last = page[-1]
        elapsed = time.monotonic() - started
        self.stdout.write(
            f"{'Checked' if options['dry_run'] else 'Upgraded'} {done} schema(s) in {elapsed:.1f}s "
            f"({elapsed / max(done, 1) * 1000:.1f} ms per schema)."
        )

    def _progress(self, done: int, total: int, plan: Any, dry_run: bool) -> None:
        line = f"[{done}/{total} ({done * 100 // total}%) {plan.schema}]"
        if dry_run:
            parts = [*plan.statements, *(f"step {name}" for name in plan.steps)]
            line += " would apply: " + (" | ".join(parts) if parts else "nothing")
        elif plan.from_version != plan.to_version:
            line += f" v{plan.from_version} -> v{plan.to_version}"
        self.stdout.write(line)
