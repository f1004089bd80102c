"""Deliver one message from an MTA pipe: ``manage.py deliver_email --to ADDRESS < file.eml``.

The last stdout line is always one JSON object ``{"status", "messageId", "reason"}``, whatever
the input. Status received, rejected or duplicate exits 0: the delivery is settled for good (a
message that can never be stored is ``rejected``, so the MTA bounces it instead of retrying it
forever). Status ``retry`` exits 75 (EX_TEMPFAIL, which MTAs treat as "try again later") and
happens only when a part of Kody is unavailable; retry with the same ``--delivery-id``. Only a
received message is charged.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError

from apps.mailbox.services import inbound, mime
from kody.errors import KodyError

EX_TEMPFAIL = 75
log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Deliver one raw MIME message read from stdin to its Kody inbox."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--to", required=True, help="the envelope recipient address")
        parser.add_argument("--delivery-id", default=None, help="the MTA's queue id, for dedupe")
        parser.add_argument("--envelope-from", default=None, help="the envelope sender")

    def handle(self, *args: Any, **options: Any) -> None:
        # One byte past the wire limit is enough to refuse it; the rest is never held.
        raw = sys.stdin.buffer.read(mime.MAX_WIRE_BYTES + 1)
        try:
            outcome = inbound.deliver(
                raw, options["to"], options["delivery_id"], options["envelope_from"]
            )
        except KodyError as exc:
            if exc.status >= 500:
                self._retry(exc, exc.code)
            # Refused for a reason no retry changes (as the webhook's 4xx): a bounce.
            outcome = inbound.Outcome("rejected", reason=exc.code)
        except Exception as exc:
            log.exception("deliver_email failed at a retryable step")
            self._retry(exc, "retryable_failure")
        self.stdout.write(json.dumps(outcome.as_json()))

    def _retry(self, exc: Exception, code: str) -> NoReturn:
        self.stdout.write(json.dumps({"status": "retry", "messageId": None, "reason": code}))
        raise CommandError(f"{code}: {exc}", returncode=EX_TEMPFAIL) from exc
