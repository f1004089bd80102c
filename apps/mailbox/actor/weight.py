"""What a stored message weighs against ``storage_bytes``, once in Python and once in SQL.

A message weighs the raw MIME kept for it (``raw_size``: the object under ``raw_mime_key``,
the reduced copy for mail past the plan's cap, 0 for a sent message, which keeps no raw MIME)
plus the UTF-8 bytes of the text it holds in its row a second time (subject, text and HTML
bodies), plus every attachment kept in a blob of its own (``external``). An attachment inside
the raw MIME (``raw-mime``) is already in ``raw_size``; one left out (``unavailable``) is
stored nowhere. Threads, headers, address lists and delivery events are small bookkeeping
and weigh nothing.

The writer reserves ``message_weight`` of the row it is about to insert, a delete releases
``stored_weight`` of the rows it removes, and the nightly reconciliation sets the meter to
``PAYLOAD_SQL`` over the whole mailbox: the three must agree to the byte, so reconciliation
never moves a meter the writers kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Sum

from apps.mailbox.actor import models as m

WEIGHED_TEXT = ("subject", "text_body", "html_body")
# A limit no meter reaches: bytes a write stores without a plan limit to check (a correction,
# a direct actor call) are still counted, never refused.
UNBOUNDED = 2**62


def _text_bytes(value: Any) -> int:
    return len(value.encode("utf-8")) if isinstance(value, str) else 0


def message_weight(message: Mapping[str, Any], attachments: Iterable[Mapping[str, Any]]) -> int:
    """The weight of a message row about to be written (the dict its insert is built from)."""
    text = sum(_text_bytes(message.get(column)) for column in WEIGHED_TEXT)
    blobs = sum(int(a.get("size") or 0) for a in attachments if a.get("storage_kind") == "external")
    return int(message.get("raw_size") or 0) + text + blobs


def stored_weight(message_ids: list[str]) -> int:
    """What these stored messages weigh, measured as ``PAYLOAD_SQL`` measures (read before
    their rows are deleted)."""
    if not message_ids:
        return 0
    rows = m.EmailMessage.objects.filter(id__in=message_ids).values(*WEIGHED_TEXT, "raw_size")
    total = sum(message_weight(row, ()) for row in rows)
    external = m.EmailAttachment.objects.filter(
        message_id__in=message_ids, storage_kind="external"
    ).aggregate(total=Sum("size"))["total"]
    return total + int(external or 0)


# Run with the owner's schema first on the search path (the meter's reconciliation). Attachments
# count only beside a message that is still there, as ``stored_weight`` reads them.
PAYLOAD_SQL = (
    "SELECT ((SELECT COALESCE(SUM(raw_size + octet_length(COALESCE(subject, ''))"
    " + octet_length(COALESCE(text_body, '')) + octet_length(COALESCE(html_body, ''))), 0)"
    f" FROM {m.EmailMessage._meta.db_table})"
    " + (SELECT COALESCE(SUM(a.size), 0)"
    f" FROM {m.EmailAttachment._meta.db_table} a"
    f" JOIN {m.EmailMessage._meta.db_table} msg ON msg.id = a.message_id"
    " WHERE a.storage_kind = 'external'))::bigint"
)
