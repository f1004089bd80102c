"""How many SQL statements one inbound message costs, bounded so it cannot creep back up.

A count, not a time (timings belong to benchmarks/mail.py). Measured inline (the same actor
runtime as a shard worker, without the queue) for a warm mailbox: the schema, the inbox and
the day's counter already exist, as for every message but a user's first.
"""

from __future__ import annotations

from email.message import EmailMessage

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.mailbox.services import inbound
from tests.mailbox.conftest import address, simple_mail

pytestmark = pytest.mark.django_db

# 41 before the statement cuts (two Mailbox calls and a finalize cast; benchmarks/README.md).
# Counted is what goes through Django's connection: the Mailbox's statements, the public
# reads before it, and whatever the kernel's call path issues there (savepoints here, and
# each call's record insert: the kernel sends it through Django's cursor, with the fence guard
# and COMMIT when it commits — ADR 0015; it was the same statement, uncounted, at 24). 26 until
# the claim and the commit read the owner identity with the ledger row (and the claim its
# mailbox-full probe) in one statement each; 23 until the sender rules were read with the inbox.
# That count is of round trips (a multi-statement query counts once); since the commit sends
# thread, message, attachments and finalize as one query (and the claim its due-owner hint and
# ledger insert), the statements in them are bounded too. 19 round trips (22 statements) until
# each call's prelude (the caller's settings read, search path and timeouts set: one query)
# was counted too: the kernel sends it through Django's cursor bookkeeping now, where it went
# out uncounted on psycopg's own cursor before. Same round trips, two more of them visible.
# 21 round trips (26 statements) until a delivery held its bytes against storage_bytes: one
# UPDATE of the owner's meter row inside the claim's call (its transaction, no extra call, no
# shared table written; the bucket estimates are read in the same statement).
PLAIN_MESSAGE_MAX = 22
PLAIN_MESSAGE_STATEMENTS_MAX = 27
# A reply with an attachment: the parent-thread lookup, and the thread touch and the attachment
# insert inside the commit's one query.
REPLY_WITH_ATTACHMENT_MAX = PLAIN_MESSAGE_MAX + 1
REPLY_WITH_ATTACHMENT_STATEMENTS_MAX = PLAIN_MESSAGE_STATEMENTS_MAX + 2


def statement_count(sql: list[str]) -> int:
    """Statements, counting each one of a multi-statement query."""
    return sum(len(query.split(";\n")) for query in sql)


def statements(raw: bytes, to: str, delivery_id: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert inbound.deliver(raw, to, delivery_id).status == "received"
    return [q["sql"][:120] for q in captured.captured_queries]


def test_a_plain_inbound_message_costs_a_bounded_number_of_statements(owner):
    inbound.deliver(simple_mail("warm-up"), address(owner), "s-warm")
    sql = statements(simple_mail("Hello", message_id="<s1@x>"), address(owner), "s-1")
    assert len(sql) <= PLAIN_MESSAGE_MAX, "\n".join(sql)
    assert statement_count(sql) <= PLAIN_MESSAGE_STATEMENTS_MAX, "\n".join(sql)


def test_a_reply_with_an_attachment_costs_a_bounded_number_of_statements(owner):
    inbound.deliver(simple_mail("warm-up", message_id="<root@x>"), address(owner), "s-warm")
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "ada@example.org", address(owner), "Re: warm-up"
    msg["Message-ID"], msg["In-Reply-To"] = "<s2@x>", "<root@x>"
    msg.set_content("See attached.")
    msg.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="a.pdf")
    sql = statements(msg.as_bytes(), address(owner), "s-2")
    assert len(sql) <= REPLY_WITH_ATTACHMENT_MAX, "\n".join(sql)
    assert statement_count(sql) <= REPLY_WITH_ATTACHMENT_STATEMENTS_MAX, "\n".join(sql)


def test_a_duplicate_costs_less_than_a_delivery(owner):
    inbound.deliver(simple_mail(), address(owner), "s-dup")
    with CaptureQueriesContext(connection) as captured:
        assert inbound.deliver(simple_mail(), address(owner), "s-dup").status == "duplicate"
    assert len(captured.captured_queries) <= PLAIN_MESSAGE_MAX // 2
