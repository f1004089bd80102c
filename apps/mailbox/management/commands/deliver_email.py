"""Deliver one message from an MTA pipe: ``manage.py deliver_email --to ADDRESS < file.eml``.

The last stdout line is one JSON object ``{"status", "messageId", "reason"}`` with status
received, rejected or duplicate (exit 0). A retryable failure exits 75 (EX_TEMPFAIL, which
MTAs treat as "try again later"); retry with the same ``--delivery-id``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.mailbox.services import inbound
from kody.errors import KodyError

EX_TEMPFAIL = 75


class Command(BaseCommand):
    help = "Deliver one raw MIME message read from stdin to its Kody inbox."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--to", required=True, help="the envelope recipient address")
        parser.add_argument("--delivery-id", default=None, help="the MTA's queue id, for dedupe")
        parser.add_argument("--envelope-from", default=None, help="the envelope sender")

    def handle(self, *args: Any, **options: Any) -> None:
        raw = sys.stdin.buffer.read()
        try:
            outcome = inbound.deliver(
                raw, options["to"], options["delivery_id"], options["envelope_from"]
            )
        except KodyError as exc:
            raise CommandError(f"{exc.code}: {exc.message}", returncode=EX_TEMPFAIL) from exc
        except Exception as exc:
            raise CommandError(f"retryable failure: {exc}", returncode=EX_TEMPFAIL) from exc
        self.stdout.write(json.dumps(outcome.as_json()))
