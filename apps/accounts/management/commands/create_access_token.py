"""``manage.py create_access_token EMAIL [--name N]``: issue a PAT for scripts and first setup.

The plaintext token is the last line of output, so ``| tail -n 1`` captures it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import User
from apps.accounts.models.users import normalize_email
from apps.accounts.services.tokens import create_token
from kody.errors import KodyError


class Command(BaseCommand):
    help = "Create a personal access token for a user and print it (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--name", default="manage.py create_access_token")

    def handle(self, *args: Any, email: str, name: str, **options: Any) -> None:
        user = User.objects.filter(email=normalize_email(email)).first()
        if user is None:
            raise CommandError(f"no user with email {email}")
        try:
            token, raw = create_token(user, name, enforce_rate_limit=False)
        except KodyError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            f"Created token {token.name!r} ({token.token_prefix}…) for {user.username}."
        )
        self.stdout.write(raw)
