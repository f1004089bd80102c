"""``manage.py rotate_secret_key``: re-seal every secret entry under the current key.

Add the new key to ``KODY_SECRET_KEYS``, point ``KODY_SECRET_KEY_ID`` at it, deploy, run this,
and only then remove the old key (docs/runbooks/reindex.md § Secret keys). It prints one line:

    rotate_secret_key key_id=NEW resealed=N from=OLD:N,... unreadable=0 remaining=0

``from`` says which keys the re-sealed rows left; ``remaining`` counts rows still not under
the current key (written meanwhile under an old key, or unreadable). A row no key here opens
fails the command, so an operator never retires a key while rows still need it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.packages.services import secrets


def _counts(counter: Any) -> str:
    return ",".join(f"{key}:{n}" for key, n in sorted(counter.items())) or "-"


class Command(BaseCommand):
    help = "Re-encrypt secret entries sealed with an older key under KODY_SECRET_KEY_ID."

    def handle(self, *args: Any, **options: Any) -> None:
        report = secrets.rotate()
        self.stdout.write(
            f"rotate_secret_key key_id={report.current} resealed={sum(report.resealed.values())}"
            f" from={_counts(report.resealed)} unreadable={sum(report.unreadable.values())}"
            f" remaining={report.remaining}"
        )
        if report.unreadable:
            raise CommandError(
                f"{sum(report.unreadable.values())} secret entries open with no key here "
                f"({_counts(report.unreadable)}); add the missing key to KODY_SECRET_KEYS"
            )
