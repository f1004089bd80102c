"""Real-world MIME shapes round-trip: what emailMessageGet returns is what the standard
library parses from the same bytes (bodies, subject, sender, attachments and their bytes)."""

from __future__ import annotations

import base64
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest

from tests.mailbox.conftest import address, cap, deliver_cli

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def base(subject: str = "Corpus") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "Sender <sender@example.org>"
    msg["To"] = "owner@mail.test"
    msg["Subject"] = subject
    msg["Message-ID"] = f"<{abs(hash(subject))}@example.org>"
    return msg


def alternative() -> bytes:
    msg = base("Alternative")
    msg.set_content("Plain version\n")
    msg.add_alternative("<p>HTML <b>version</b></p>", subtype="html")
    return msg.as_bytes()


def related_inline_image() -> bytes:
    msg = base("Related")
    msg.set_content("See the logo.\n")
    msg.add_alternative('<p>Logo: <img src="cid:logo@x"></p>', subtype="html")
    html = msg.get_payload()[1]
    html.add_related(PNG, "image", "png", cid="<logo@x>", filename="logo.png")
    return msg.as_bytes()


def attachments() -> bytes:
    msg = base("Attachments")
    msg.set_content("Two files attached.\n")
    msg.add_attachment(b"%PDF-1.4 fake", maintype="application", subtype="pdf",
                       filename="report.pdf")  # fmt: skip
    msg.add_attachment("a,b\n1,2\n", subtype="csv", filename="data.csv")
    return msg.as_bytes()


def latin1() -> bytes:
    return (
        b"From: =?iso-8859-1?q?Fran=E7ois?= <f@example.fr>\r\n"
        b"To: owner@mail.test\r\nSubject: =?iso-8859-1?q?Caf=E9_cr=E8me?=\r\n"
        b"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=iso-8859-1\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\nD=E9j=E0 vu, =E7a va.\r\n"
    )


def shift_jis() -> bytes:
    body = "こんにちは世界".encode("shift_jis")
    return (
        b"From: jp@example.jp\r\nTo: owner@mail.test\r\n"
        b"Subject: =?ISO-2022-JP?B?GyRCJDMkcyRLJEEkTxsoQg==?=\r\n"
        b"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=shift_jis\r\n"
        b"Content-Transfer-Encoding: 8bit\r\n\r\n" + body + b"\r\n"
    )


def rfc2047_utf8() -> bytes:
    return (
        b"From: =?utf-8?b?w4Frb3MgTsOpbWV0aA==?= <akos@example.hu>\r\n"
        b"To: owner@mail.test\r\nSubject: =?utf-8?q?=C3=9Cber_die_Br=C3=BCcke?=\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n\r\nHallo.\r\n"
    )


def broken_boundary() -> bytes:
    return (
        b"From: broken@example.org\r\nTo: owner@mail.test\r\nSubject: Broken\r\n"
        b'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="DECLARED"\r\n\r\n'
        b"--OTHER\r\nContent-Type: text/plain\r\n\r\nlost body\r\n--OTHER--\r\n"
    )


def missing_headers() -> bytes:
    return b"Content-Type: text/plain\r\n\r\nNo sender, no subject, no date.\r\n"


def eight_bit_unknown_charset() -> bytes:
    return (
        b"From: x@example.org\r\nTo: owner@mail.test\r\nSubject: 8bit\r\n"
        b"Content-Type: text/plain; charset=x-no-such-charset\r\n"
        b"Content-Transfer-Encoding: 8bit\r\n\r\nna\xc3\xafve caf\xc3\xa9 \xff\r\n"
    )


def bad_address_header() -> bytes:
    return (
        b"From: <<<not an address\r\nTo: owner@mail.test, ,,@@\r\nSubject: Bad addr\r\n"
        b"Content-Type: text/plain\r\n\r\nstill here\r\n"
    )


def forwarded_message() -> bytes:
    inner = base("Inner")
    inner.set_content("inner body\n")
    msg = base("Forward")
    msg.set_content("See below.\n")
    msg.add_attachment(inner)
    return msg.as_bytes()


CORPUS = {
    "alternative": alternative,
    "related_inline_image": related_inline_image,
    "attachments": attachments,
    "latin1_quoted_printable": latin1,
    "shift_jis_8bit": shift_jis,
    "rfc2047_utf8": rfc2047_utf8,
    "broken_boundary": broken_boundary,
    "missing_headers": missing_headers,
    "eight_bit_unknown_charset": eight_bit_unknown_charset,
    "bad_address_header": bad_address_header,
    "forwarded_message": forwarded_message,
}


def content(part) -> str:
    try:
        return part.get_content()
    except LookupError:  # an unknown charset: the documented fallback is UTF-8, replaced
        return part.get_payload(decode=True).decode("utf-8", errors="replace")


def expected(raw: bytes) -> dict:
    msg = message_from_bytes(raw, policy=policy.default)
    text, html = msg.get_body(("plain",)), msg.get_body(("html",))
    text_body = content(text) if text is not None else None
    skip = {id(text), id(html)}
    if text is None and html is None and msg.get_content_maintype() == "multipart":
        text_body = msg.get_payload()  # the boundary never appeared: the parser's text
        skip.add(id(msg))
    leaves = [p for p in msg.walk() if not p.is_multipart() and id(p) not in skip]
    return {
        "subject": str(msg["Subject"] or ""),
        "textBody": text_body,
        "htmlBody": content(html) if html is not None else None,
        "attachments": [
            (p.get_filename(), p.get_content_type(), p.get_payload(decode=True)) for p in leaves
        ],
        "malformed": any(p.defects for p in msg.walk()),
    }


@pytest.mark.parametrize("shape", sorted(CORPUS))
def test_corpus_round_trips(shape, owner, owner_key):
    raw = CORPUS[shape]()
    want = expected(raw)
    result = deliver_cli(raw, address(owner), f"corpus-{shape}")
    assert result["status"] == "received"

    response = cap(owner_key, "emailMessageGet", {"messageId": result["messageId"]})
    assert response.status_code == 200, response.content
    got = response.json()["message"]
    assert got["subject"] == want["subject"]
    assert got["textBody"] == want["textBody"]
    assert got["htmlBody"] == want["htmlBody"]
    assert got["malformed"] == want["malformed"]
    assert [(a["filename"], a["contentType"], a["size"]) for a in got["attachments"]] == [
        (name, ctype, len(data)) for name, ctype, data in want["attachments"]
    ]
    for att, (_name, _ctype, data) in zip(got["attachments"], want["attachments"], strict=True):
        fetched = cap(
            owner_key,
            "emailAttachmentGet",
            {"messageId": got["id"], "attachmentId": att["id"]},
        )
        assert base64.b64decode(fetched.json()["attachment"]["contentBase64"]) == data


def test_the_corpus_covers_the_shapes_it_claims():
    related = expected(related_inline_image())
    assert [a[1] for a in related["attachments"]] == ["image/png"]
    assert expected(latin1())["textBody"].rstrip() == "Déjà vu, ça va."
    assert expected(rfc2047_utf8())["subject"] == "Über die Brücke"
    assert expected(broken_boundary())["malformed"] is True
    assert expected(missing_headers())["subject"] == ""
    assert "caf" in expected(eight_bit_unknown_charset())["textBody"]
