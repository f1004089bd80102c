"""``manage.py create_user EMAIL --username NAME [--staff | --superuser]`` for first setup.

The password comes from a prompt when run in a terminal, from ``--password-stdin`` in scripts,
or not at all: then the command prints a one-time link that sets it.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import identity
from kody.errors import KodyError


class Command(BaseCommand):
    help = (
        "Create a verified account. In a terminal it asks for the password; --password-stdin "
        "reads it from standard input; otherwise it prints a one-time set-password link. "
        "--staff makes an operator (the 'operators' group in /admin/); --superuser has every "
        "right."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--username", required=True)
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--password", default=None, help="Visible in shell history; avoid.")
        source.add_argument("--password-stdin", action="store_true")
        role = parser.add_mutually_exclusive_group()
        role.add_argument("--staff", action="store_true")
        role.add_argument("--superuser", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        password = self._password(options)
        try:
            user = identity.provision(
                email=options["email"],
                username=options["username"],
                password=password,
                staff=options["staff"],
                superuser=options["superuser"],
            )
        except KodyError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        role = "superuser " if user.is_superuser else "staff " if user.is_staff else ""
        self.stdout.write(
            f"Created {role}user {user.username} <{user.email}> "
            f"with stable id {user.stable_user_id}"
        )
        if password is None:
            link = identity.set_password_link(user)
            self.stdout.write(f"Set its password within 24 hours (the link works once):\n{link}")

    def _password(self, options: dict[str, Any]) -> str | None:
        if options["password"] is not None:
            return str(options["password"])
        if options["password_stdin"]:
            line = sys.stdin.readline().rstrip("\r\n")
            if not line:
                raise CommandError("--password-stdin read an empty password")
            return line
        if options.get("interactive", True) and sys.stdin.isatty():
            first = getpass.getpass("Password: ")
            if first != getpass.getpass("Password (again): "):
                raise CommandError("The passwords do not match.")
            return first or None
        return None
