"""``manage.py create_user EMAIL --username NAME [--password P] [--staff]`` for first setup."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import identity
from kody.errors import KodyError


class Command(BaseCommand):
    help = (
        "Create a verified account. Without --password the account can sign in only after a "
        "password reset. --staff lets it use Django admin."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--username", required=True)
        parser.add_argument("--password", default=None)
        parser.add_argument("--staff", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = identity.provision(
                email=options["email"],
                username=options["username"],
                password=options["password"],
                staff=options["staff"],
            )
        except KodyError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        role = "staff " if user.is_staff else ""
        self.stdout.write(
            f"Created {role}user {user.username} <{user.email}> "
            f"with stable id {user.stable_user_id}"
        )
