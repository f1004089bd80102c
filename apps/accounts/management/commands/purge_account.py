"""``manage.py purge_account EMAIL --yes``: delete one account completely, step by step.

Prints one line per step with its counts; exits 0 only when the deletion completed, and
non-zero with the reason when the account was kept (rerun the same command to continue) or
when another run of the same deletion (the form, the resume lane) is in progress.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.deletion import job
from apps.accounts.models import AccountDeletion, DeletionStatus, User


class Command(BaseCommand):
    help = "Delete an account and everything it owns (resumable; needs --yes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--yes", action="store_true", help="confirm the deletion")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["yes"]:
            raise CommandError("this deletes the account and all its data: pass --yes")
        email = options["email"].strip()
        user = User.objects.filter(email__iexact=email).first()
        if user is not None:
            deletion = job.start(user, requested_by="operator")
        else:
            deletion = self._unfinished(email)
        total = len(job.STEPS)

        def show(report: job.StepReport) -> None:
            index = job.STEPS.index(report.step) + 1
            counts = {**report.deleted, **{f"~{k}": v for k, v in report.updated.items()}}
            shown = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v) or "nothing"
            self.stdout.write(f"[{index}/{total}] {report.step}: {shown}")
            for warning in report.warnings:
                self.stdout.write(f"    warning: {warning}")

        try:
            deletion = job.run(deletion, on_step=show)
        except job.DeletionInProgress as exc:
            raise CommandError(
                f"{exc.message} Nothing was done here; rerun once it has stopped."
            ) from exc
        if deletion.status != DeletionStatus.COMPLETE:
            raise CommandError(
                f"account retained at step {deletion.step}: {deletion.last_error} "
                "(rerun to continue)"
            )
        self.stdout.write(f"deleted {email}: complete after {deletion.attempts} attempt(s)")

    def _unfinished(self, email: str) -> AccountDeletion:
        raise CommandError(f"no account with email {email!r}")
