"""``manage.py import_account DIR [--email NEW]``: restore an export into this instance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.export import importer
from kody.errors import KodyError


class Command(BaseCommand):
    help = "Import an export_account directory as a new account here (all rows or none)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory")
        parser.add_argument("--email", default=None, help="sign in with this address instead")
        parser.add_argument("--no-reindex", action="store_true", help="skip rebuilding vectors")
        parser.add_argument(
            "--resume",
            action="store_true",
            help="the account exists from an earlier run that stopped in actor state: "
            "import that part again (it is idempotent)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        directory = Path(options["directory"])
        try:
            if options["resume"]:
                report = importer.resume(directory, email=options["email"])
            else:
                report = importer.import_account(directory, email=options["email"])
        except importer.ImportIncomplete as exc:
            raise CommandError(f"import incomplete: {exc.message}") from None
        except KodyError as exc:
            raise CommandError(f"import refused: {exc.message}") from None
        user = report.user
        assert user is not None
        for table, count in sorted(report.rows.items()):
            self.stdout.write(f"imported {table}: {count}")
        for what, why in sorted(report.skipped.items()):
            self.stdout.write(f"not imported {what}: {why}")
        for warning in report.warnings:
            self.stdout.write(f"warning: {warning}")
        if not options["no_reindex"]:
            try:
                call_command("reindex", "--user", user.email, stdout=self.stdout)
            except CommandError as exc:
                self.stdout.write(f"warning: reindex did not run: {exc}")
        self.stdout.write(
            f"imported {user.email} (stable id {user.stable_user_id}): "
            f"{sum(report.rows.values())} rows, {report.blobs} blobs; "
            "set a password with the reset link before signing in"
        )
