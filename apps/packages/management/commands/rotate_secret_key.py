"""``manage.py rotate_secret_key``: re-seal every secret entry under the current key.

Add the new key to ``KODY_SECRET_KEYS``, point ``KODY_SECRET_KEY_ID`` at it, deploy, run this,
and only then remove the old key (docs/runbooks/reindex.md § Secret keys).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from apps.packages.services import crypto, secrets


class Command(BaseCommand):
    help = "Re-encrypt secret entries sealed with an older key under KODY_SECRET_KEY_ID."

    def handle(self, *args: Any, **options: Any) -> None:
        count = secrets.rotate()
        self.stdout.write(f"rotate_secret_key key_id={crypto.keyring().current} resealed={count}")
