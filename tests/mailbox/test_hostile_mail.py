"""Anyone can send mail: a corpus of hostile messages, each through both inbound doors.

Every message ends ``received`` or ``rejected`` (never a 500, never an endless retry), a
retry of the same delivery is a ``duplicate``, only what was stored is charged, and the mailbox
still lists and reads afterwards. The big messages are built here, never committed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from django.test import Client

from apps.mailbox.actor import Mailbox
from apps.mailbox.services import bounds
from kody.blobs import bucket
from kody.blobs.keys import email_raw_key
from tests.mailbox.conftest import address, cap, deliver_cli, raw_blobs, receives_today

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SECRET = "inbound-secret-for-tests"
HEAD = b"From: Mallory <mallory@example.org>\r\nTo: owner@mail.test\r\nMIME-Version: 1.0\r\n"
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def nul_subject() -> bytes:
    return (
        b"From: Mal\x00lory <mallory@example.org>\r\nTo: owner@mail.test\r\n"
        b"Subject: =?utf-8?q?pay=00now?= \x00 =?utf-8?b?AAAA?=\r\n\r\nhello\r\n"
    )


def nul_body() -> bytes:
    return HEAD + (
        b"Subject: nul body\r\n"
        b'Content-Type: multipart/alternative; boundary="B"\r\n\r\n'
        b"--B\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
        b"before=00after\r\n"
        b"--B\r\nContent-Type: text/html\r\n\r\n<p>raw\x00nul</p>\r\n--B--\r\n"
    )


def nested_multiparts(depth: int = 1000) -> bytes:
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="n%d"\r\n\r\n--n%d\r\n' % (i, i)
        for i in range(depth)
    )
    closing = b"".join(b"\r\n--n%d--" % i for i in reversed(range(depth)))
    leaf = b"Content-Type: text/plain\r\n\r\ndeep"
    return HEAD + b"Subject: nested\r\n" + opening + leaf + closing


def many_parts(count: int = 20_000) -> bytes:
    part = (
        b"--B\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Disposition: attachment\r\n\r\nx\r\n"
    )
    body = b"--B\r\nContent-Type: text/plain\r\n\r\nthe text\r\n" + part * count + b"--B--\r\n"
    head = b'Subject: many parts\r\nContent-Type: multipart/mixed; boundary="B"\r\n\r\n'
    return HEAD + head + body


def huge_subject() -> bytes:
    return HEAD + b"Subject: " + b"S" * (5 * 1024 * 1024) + b"\r\n\r\nbody\r\n"


def encoded_words(count: int = 50_000) -> bytes:
    return HEAD + b"Subject: " + b" ".join([b"=?utf-8?q?ab?="] * count) + b"\r\n\r\nbody\r\n"


def crlf_filename() -> bytes:
    return HEAD + (
        b'Subject: crlf\r\nContent-Type: multipart/mixed; boundary="B"\r\n\r\n'
        b"--B\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"
        b"--B\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Disposition: attachment; filename*=utf-8''evil%0D%0ASet-Cookie%3A%20x.txt\r\n"
        b"\r\npayload\r\n--B--\r\n"
    )


def truncated() -> bytes:
    # Cut inside a uuencoded body (which decodes to NUL padding) and inside a base64 attachment.
    return HEAD + (
        b'Subject: cut\r\nContent-Type: multipart/mixed; boundary="B"\r\n\r\n'
        b"--B\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\n"
        b"begin 644 f\r\nM\r\n"
        b'--B\r\nContent-Type: application/pdf; name="a.pdf"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\nJVBER"
    )


def invalid_charsets() -> bytes:
    return (
        b"From: =?x-bogus?q?Bo=FFb?= <bob@example.org>\r\nTo: owner@mail.test\r\n"
        b"Subject: caf\xe9 \xff =?no-such-charset?b?AAAA?= =?utf-8?b?////?=\r\n"
        b'MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary="B"\r\n\r\n'
        b"--B\r\nContent-Type: text/plain; charset=utf-99\r\nContent-Transfer-Encoding: 8bit\r\n"
        b"\r\n\xff\xfe plain\r\n"
        b'--B\r\nContent-Type: text/html; charset="=?x?q?y?="\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n!!notbase64\r\n--B--\r\n"
    )


CORPUS: dict[str, Callable[[], bytes]] = {
    "nul_subject": nul_subject,
    "nul_body": nul_body,
    "nested_1000": nested_multiparts,
    "parts_20000": many_parts,
    "subject_5mib": huge_subject,
    "encoded_words_50000": encoded_words,
    "crlf_filename": crlf_filename,
    "truncated_mime": truncated,
    "invalid_charsets": invalid_charsets,
}


def post(raw: bytes, to: str, delivery_id: str) -> dict:
    response = Client(HTTP_X_KODY_INBOUND_SECRET=SECRET).post(
        f"/inbound/email?to={to}&deliveryId={delivery_id}", raw, content_type="message/rfc822"
    )
    assert response.status_code == 200, response.content[:300]
    return response.json()


def storable(value) -> bool:
    if isinstance(value, str):
        return not UNSTORABLE.search(value)
    if isinstance(value, dict):
        return all(storable(k) and storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(storable(v) for v in value)
    return True


def settled_through_both_doors(owner, raw: bytes, name: str) -> list[dict]:
    """Deliver through the pipe and the webhook; each settles, and a retry is a duplicate."""
    results = []
    for door, deliver in (("cli", deliver_cli), ("http", post)):
        first = deliver(raw, address(owner), f"{name}-{door}")
        assert first["status"] in ("received", "rejected"), first
        again = deliver(raw, address(owner), f"{name}-{door}")
        expected = "duplicate" if first["status"] == "received" else "rejected"
        assert again["status"] == expected and again["messageId"] == first["messageId"]
        results.append(first)
    return results


def still_lists_and_reads(owner, owner_key, message_ids: list[str]) -> list[dict]:
    listed = cap(owner_key, "emailMessageList", {"limit": 100})
    assert listed.status_code == 200
    assert {m["id"] for m in listed.json()["messages"]} >= set(message_ids)
    client = Client()
    client.force_login(owner)
    assert client.get("/account/email").status_code == 200
    got = []
    for message_id in message_ids:
        response = cap(owner_key, "emailMessageGet", {"messageId": message_id})
        assert response.status_code == 200, response.content[:300]
        message = response.json()["message"]
        got.append(message)
        assert client.get(f"/account/email/messages/{message_id}").status_code == 200
        for att in message["attachments"][:3]:
            url = f"/account/email/messages/{message_id}/attachments/{att['id']}"
            status = 409 if att["storageKind"] == "unavailable" else 200
            assert client.get(url).status_code == status
    return got


@pytest.mark.parametrize("shape", sorted(CORPUS))
def test_a_hostile_message_is_settled_for_good_and_the_mailbox_survives(shape, owner, owner_key):
    raw = CORPUS[shape]()
    results = settled_through_both_doors(owner, raw, shape)

    stored = [r["messageId"] for r in results if r["status"] == "received"]
    assert receives_today(owner) == len(stored)  # only what was stored is charged, once
    assert raw_blobs(owner) == sorted(email_raw_key(owner.stable_user_id, m) for m in stored)
    for message in still_lists_and_reads(owner, owner_key, stored):
        assert storable(message)
        assert len(message["subject"]) <= bounds.DISPLAY_CHARS
        assert len(message["from"]) <= bounds.DISPLAY_CHARS
        assert len(message["attachments"]) <= bounds.MAX_PARTS


def received(owner, raw: bytes, delivery_id: str) -> dict:
    result = deliver_cli(raw, address(owner), delivery_id)
    assert result["status"] == "received", result
    return Mailbox.call(owner.stable_user_id, "get_message", message_id=result["messageId"])


def test_nul_is_replaced_wherever_it_hides(owner):
    subject = received(owner, nul_subject(), "nul-1")
    assert subject["subject"] == "pay\ufffdnow \ufffd \ufffd\ufffd\ufffd"
    assert subject["from"] == "Mal\ufffdlory <mallory@example.org>"
    body = received(owner, nul_body(), "nul-2")
    assert body["textBody"] == "before\ufffdafter"
    assert body["htmlBody"] == "<p>raw\ufffdnul</p>"


def test_mail_past_the_part_bound_is_stored_reduced_with_its_text(owner):
    got = received(owner, many_parts(), "bound-parts")
    assert got["textBody"] == "the text"
    assert "TooManyParts" in got["defects"] and got["malformed"] is True
    # What was read before the bound is listed, none of it kept: the rest was never read.
    assert 0 < len(got["attachments"]) < bounds.MAX_PARTS
    assert {a["storageKind"] for a in got["attachments"]} == {"unavailable"}
    key = email_raw_key(owner.stable_user_id, got["id"])
    assert bucket("email_blobs").size(key) <= 256 * 1024


def test_mail_nested_past_the_depth_bound_is_stored_reduced(owner):
    got = received(owner, nested_multiparts(), "bound-depth")
    assert "NestedTooDeep" in got["defects"]
    assert {a["storageKind"] for a in got["attachments"]} <= {"unavailable"}
    within = received(owner, nested_multiparts(bounds.MAX_DEPTH - 1), "within-depth")
    assert within["textBody"] == "deep" and within["defects"] == []


def test_listed_header_values_are_capped(owner):
    got = received(owner, huge_subject(), "huge-subject")
    assert got["subject"] == "S" * (bounds.DISPLAY_CHARS - 1) + "…"
    assert "HeaderTooLong" in got["defects"]
    assert all(len(value) <= 4000 for _name, value in got["headers"])


def test_fifty_thousand_encoded_words_parse_in_linear_time(owner):
    raw = encoded_words()
    started = time.monotonic()
    got = received(owner, raw, "words")
    assert time.monotonic() - started < 10  # 99 s before the bound
    assert got["subject"].startswith("abababab") and len(got["subject"]) == bounds.DISPLAY_CHARS


def test_a_crlf_filename_downloads_under_a_safe_name(owner):
    got = received(owner, crlf_filename(), "crlf")
    [attachment] = got["attachments"]
    assert attachment["filename"] == "evil Set-Cookie: x.txt"
    client = Client()
    client.force_login(owner)
    response = client.get(f"/account/email/messages/{got['id']}/attachments/{attachment['id']}")
    assert response.status_code == 200 and response.content == b"payload"
    assert response["Content-Disposition"] == 'attachment; filename="evil Set-Cookie: x.txt"'
    assert not response.has_header("Set-Cookie")


def test_a_delivery_id_the_ledger_cannot_hold_still_lands_once(owner):
    long_id = "q" * 600
    first = deliver_cli(nul_body(), address(owner), long_id)
    assert first["status"] == "received"
    again = deliver_cli(nul_body(), address(owner), long_id)
    assert again == {"status": "duplicate", "messageId": first["messageId"], "reason": None}
    assert receives_today(owner) == 1


def test_an_unusable_recipient_is_rejected_for_good():
    for recipient in ("\udcff@mail.test", "a" * 5000 + "@mail.test", "<<<@@@>>>"):
        result = deliver_cli(b"Subject: x\r\n\r\nx\r\n", recipient, "bad-rcpt")
        assert result == {"status": "rejected", "messageId": None, "reason": "unknown_recipient"}


def test_deliver_email_prints_its_status_line_even_when_it_must_retry(owner, monkeypatch):
    import io
    import json
    import sys

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from apps.mailbox.errors import BlobUnavailable
    from apps.mailbox.services import blobstore

    def broken(key: str, data: bytes) -> None:
        raise BlobUnavailable()

    monkeypatch.setattr(blobstore, "put", broken)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(nul_body())))
    with pytest.raises(CommandError) as failure:
        call_command("deliver_email", "--to", address(owner), "--delivery-id", "d-r", stdout=out)
    assert failure.value.returncode == 75
    line = json.loads(out.getvalue().strip().splitlines()[-1])
    assert line == {"status": "retry", "messageId": None, "reason": "inbound_retry"}


@pytest.mark.parametrize(
    "shape", ["nul_subject", "nested_1000", "subject_5mib", "invalid_charsets"]
)
def test_the_operator_inbox_settles_the_same_corpus(shape):
    from apps.system_email.models import SystemEmailMessage

    raw = CORPUS[shape]()
    first = deliver_cli(raw, "abuse@mail.test", f"sys-{shape}")
    assert first["status"] == "received", first
    assert deliver_cli(raw, "abuse@mail.test", f"sys-{shape}")["status"] == "duplicate"
    stored = SystemEmailMessage.objects.get(id=first["messageId"])
    assert storable(stored.subject) and len(stored.subject) <= bounds.DISPLAY_CHARS
    assert storable(stored.from_address) and storable(stored.text_body or "")


def test_the_webhook_answers_an_unexpected_failure_with_retry_not_500(owner, monkeypatch):
    from apps.mailbox.services import routing

    def down(recipient: str):
        raise RuntimeError("database went away")

    monkeypatch.setattr(routing, "resolve", down)
    response = Client(HTTP_X_KODY_INBOUND_SECRET=SECRET, raise_request_exception=False).post(
        f"/inbound/email?to={address(owner)}&deliveryId=w-down",
        nul_body(),
        content_type="message/rfc822",
    )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "inbound_retry"


def test_the_delivery_event_webhook_refuses_nul_in_its_json_body():
    import json

    body = {"provider": "django", "providerMessageId": "<a\x00b>", "eventType": "bounced"}
    response = Client(HTTP_X_KODY_INBOUND_SECRET=SECRET, raise_request_exception=False).post(
        "/inbound/email-events", json.dumps(body), "application/json"
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
