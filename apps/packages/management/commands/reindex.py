"""``manage.py reindex``: rebuild vectors from their source rows. See docs/runbooks/reindex.md."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from apps.accounts.models import User
from apps.packages.services import reindex


class Command(BaseCommand):
    help = "Rebuild vectors (memory, job, package, capability); skips unchanged unless --force."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--kind", action="append", choices=reindex.CHOICES, help="repeatable; default: all"
        )
        parser.add_argument("--user", metavar="EMAIL", help="only this account's vectors")
        parser.add_argument("--force", action="store_true", help="ignore fingerprints")
        parser.add_argument("--resume", action="store_true", help="continue a killed run")
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument(
            "--throttle", type=float, default=0.0, help="seconds to pause between batches"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        kinds = options["kind"] or list(reindex.CHOICES)
        user_id = self._user_id(options["user"])
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        opts = reindex.Options(
            user_id=user_id,
            force=options["force"],
            resume=options["resume"],
            batch_size=options["batch_size"],
            throttle=options["throttle"],
        )
        summary = reindex.Summary()
        for kind in kinds:
            if kind == "capability" and user_id:
                continue  # builtins belong to no account
            total = reindex.total(kind, opts)
            with tqdm(total=total, desc=kind, unit="row", file=sys.stderr, disable=None) as bar:
                if kind == "capability":
                    reindex.reindex_capabilities(opts, summary, bar.update)
                else:
                    reindex.reindex_rows(kind, opts, summary, bar.update)
        self.stdout.write(summary.line())

    def _user_id(self, email: str | None) -> str | None:
        if not email:
            return None
        user = User.objects.filter(email__iexact=email.strip()).first()
        if user is None:
            raise CommandError(f"no account with email {email}")
        return user.stable_user_id
