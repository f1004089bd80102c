"""Reading MIME with the standard library (``email`` with ``policy.default``), never crashing.

``parse(raw)`` turns any bytes into the graph's message fields and attachment rows. Bodies are
what ``get_body()`` picks (plain, then html); every other leaf part is an attachment that
stays inside the raw MIME (``raw-mime``, found again by its leaf index). Whatever the parser
complains about is kept as ``defects``: malformed mail is stored and marked, not refused.
The work is bounded (``bounds``: depth, part count, header sizes); a message past a bound is
read as far as the bound, marked (``Parsed.bound``, also a defect) and stored reduced. Every
string handed on is storable (no NUL, no lone surrogate) and the listed fields are capped.

``reduce_to_cap(raw, cap, parsed)`` is for mail above the plan's persist cap (or past a bound):
the original header lines are kept byte for byte (minus the MIME ones), the text and html
bodies are re-encoded into a fresh multipart/alternative, every other part is dropped and
reported as unavailable, and the bodies are shortened if that is what it takes to fit.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from email import policy
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from typing import Any

from apps.mailbox.services import bounds
from apps.mailbox.services.bounds import DISPLAY_CHARS, MAX_ADDRESSES, capped

MAX_WIRE_BYTES = bounds.MAX_WIRE_BYTES
MAX_HEADERS = 200
MAX_HEADER_VALUE = 4000
_MIME_HEADERS = {b"content-type", b"content-transfer-encoding", b"mime-version"}
_FOLDED = re.compile(r"\r?\n(?=[ \t])")


@dataclass
class Parsed:
    message: dict[str, Any]
    attachments: list[dict[str, Any]] = field(default_factory=list)
    # The bound the message went past (TooManyParts, NestedTooDeep, Unparseable): store reduced.
    bound: str | None = None


def fingerprint(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def load(raw: bytes) -> EmailMessage:
    """The message as far as the bounds allow (see ``bounds.load``)."""
    return bounds.load(raw).message


def _header(msg: Message, name: str, limit: int = DISPLAY_CHARS) -> str | None:
    try:
        value = msg.get(name)
        text = None if value is None else _FOLDED.sub("", str(value)).strip()
    except Exception:  # a header the policy cannot parse: fall back to its raw text
        text = None
        for key, raw_value in msg.raw_items():
            if key.lower() == name.lower():
                text = _FOLDED.sub("", str(raw_value)[: bounds.PARSE_CHARS]).strip()
                break
    return capped(text, limit)


def _addresses(msg: Message, name: str) -> list[str]:
    try:
        value = msg.get(name)
        if value is None:
            return []
        found = [str(addr) for addr in getattr(value, "addresses", ())]
        found = found or [_FOLDED.sub("", str(value)).strip()]
    except Exception:
        raw = _header(msg, name)
        found = [raw] if raw else []
    return [capped(addr) or "" for addr in found[:MAX_ADDRESSES]]


def _ids(value: str | None) -> list[str]:
    """Message ids, the last ``MAX_ADDRESSES`` (the nearest ancestors) and none overlong."""
    found = re.findall(r"<[^<>\s]+>", value or "")
    return [one for one in found if len(one) <= DISPLAY_CHARS][-MAX_ADDRESSES:]


def part_text(part: Message) -> str:
    """A text part's content; an unknown charset or a broken encoding degrades, never raises."""
    try:
        return part.get_content()  # type: ignore[attr-defined, no-any-return]
    except Exception:
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            return payload.decode("utf-8", errors="replace")
        payload = part.get_payload()
        return payload if isinstance(payload, str) else ""


def part_bytes(part: Message) -> bytes:
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload
    text = part.get_payload()
    return text.encode("utf-8", errors="replace") if isinstance(text, str) else b""


def leaves(msg: Message) -> list[Message]:
    """Every non-multipart part in walk order (the index an attachment row keeps)."""
    return [part for part in msg.walk() if not part.is_multipart()]


def bodies(msg: EmailMessage) -> tuple[Message | None, Message | None]:
    try:
        text = msg.get_body(preferencelist=("plain",))
    except Exception:
        text = None
    try:
        html = msg.get_body(preferencelist=("html",))
    except Exception:
        html = None
    return text, html


def _defects(msg: Message) -> list[str]:
    names = []
    for part in msg.walk():
        names.extend(type(defect).__name__ for defect in getattr(part, "defects", []))
    return sorted(set(names))


def _filename(part: Message) -> str | None:
    name = None
    try:
        name = part.get_filename()
        if name and "=?" in name:  # a nested part's header is text: its encoded words too
            name = str(make_header(decode_header(name)))
        return bounds.safe_filename(name)
    except Exception:
        return bounds.safe_filename(name) if isinstance(name, str) else None


def _disposition(part: Message) -> str | None:
    try:
        return capped(part.get_content_disposition(), bounds.DISPOSITION_CHARS)
    except Exception:
        return None


def _content_type(part: Message) -> str:
    try:
        return capped(part.get_content_type(), bounds.CONTENT_TYPE_CHARS) or "text/plain"
    except Exception:
        return "application/octet-stream"


def _headers(msg: Message) -> list[list[str]]:
    out = []
    for name, value in list(msg.raw_items())[:MAX_HEADERS]:
        head = value[:MAX_HEADER_VALUE] if isinstance(value, str) else value
        try:
            text = str(msg.policy.header_fetch_parse(name, head))
        except Exception:
            text = str(head)
        out.append([capped(name, DISPLAY_CHARS) or "", _FOLDED.sub("", text)[:MAX_HEADER_VALUE]])
    return out


def parse(raw: bytes) -> Parsed:
    """Never raises: past a bound or past what the parser can read, the message is read as far
    as it goes (at worst its headers) and ``bound`` says so."""
    loaded = bounds.load(raw)
    try:
        parsed = _read(loaded.message)
    except Exception:  # a tree the accessors cannot walk: its headers are still a message
        parsed = _read(bounds.load_headers(raw), with_parts=False)
        loaded.bound = loaded.bound or "Unparseable"
    if loaded.bound:
        parsed.bound = loaded.bound
        parsed.message["mime_defects_json"] = sorted(
            {*parsed.message["mime_defects_json"], loaded.bound}
        )
    parsed.message["raw_size"] = len(raw)
    return Parsed(
        bounds.storable(parsed.message), bounds.storable(parsed.attachments), parsed.bound
    )


def _read(msg: EmailMessage, with_parts: bool = True) -> Parsed:
    text_part, html_part = bodies(msg) if with_parts else (None, None)
    text_body = part_text(text_part) if text_part is not None else None
    html_body = part_text(html_part) if html_part is not None else None
    body_ids = {id(text_part), id(html_part)}
    if text_body is None and html_body is None and msg.get_content_maintype() == "multipart":
        # A multipart whose boundary never appears: keep what the parser saw as text.
        text_body = part_text(msg)
        body_ids.add(id(msg))
    attachments = []
    for index, part in enumerate(leaves(msg) if with_parts else []):
        if id(part) in body_ids:
            continue
        attachments.append(
            {
                "filename": _filename(part),
                "content_type": _content_type(part),
                "content_id": _header(part, "Content-ID"),
                "disposition": _disposition(part),
                "size": len(part_bytes(part)),
                "storage_kind": "raw-mime",
                "part_index": index,
            }
        )
    message = {
        "from_address": _header(msg, "From") or "",
        "to_addresses_json": _addresses(msg, "To"),
        "cc_addresses_json": _addresses(msg, "Cc"),
        "bcc_addresses_json": _addresses(msg, "Bcc"),
        "reply_to_addresses_json": _addresses(msg, "Reply-To"),
        "subject": _header(msg, "Subject") or "",
        "message_id_header": _header(msg, "Message-ID"),
        "in_reply_to_header": (_ids(_header(msg, "In-Reply-To")) or [None])[0],
        "references_json": _ids(_header(msg, "References", bounds.PARSE_CHARS)),
        "headers_json": _headers(msg),
        "auth_results": _header(msg, "Authentication-Results", MAX_HEADER_VALUE),
        "text_body": text_body,
        "html_body": html_body,
        "mime_defects_json": _defects(msg),
    }
    return Parsed(message, attachments)


def _head_and_body(raw: bytes) -> bytes:
    for sep in (b"\r\n\r\n", b"\n\n"):
        index = raw.find(sep)
        if index >= 0:
            return raw[:index]
    return raw


def _kept_header_block(raw: bytes) -> bytes:
    """The original header lines (with their continuations) minus the MIME-structure ones."""
    kept: list[bytes] = []
    keep = False
    for line in re.split(rb"\r?\n", _head_and_body(raw)):
        if line[:1] in (b" ", b"\t"):
            if keep:
                kept.append(line)
            continue
        name = line.split(b":", 1)[0].strip().lower()
        keep = b":" in line and name not in _MIME_HEADERS
        if keep:
            kept.append(line)
    return b"\r\n".join(kept)


def _body_part(text: str | None, html: str | None, omitted: int) -> bytes:
    part = EmailMessage(policy=policy.SMTP)
    part.set_content(text or "")
    if html is not None:
        part.add_alternative(html, subtype="html")
    part["X-Kody-Omitted-Parts"] = str(omitted)
    return part.as_bytes()


@dataclass
class Reduced:
    raw: bytes
    omitted: list[dict[str, Any]]
    text_body: str | None
    html_body: str | None


def reduce_to_cap(raw: bytes, cap: int, parsed: Parsed | None = None) -> Reduced:
    """Fit ``raw`` under ``cap`` bytes keeping text and html; the other parts become unavailable.

    ``parsed``: ``parse(raw)`` when the caller already has it (inbound does), so the message is
    not parsed a second time."""
    parsed = parsed if parsed is not None else parse(raw)
    omitted = [
        {**att, "storage_kind": "unavailable", "part_index": None} for att in parsed.attachments
    ]
    head = _kept_header_block(raw)
    text, html = parsed.message["text_body"], parsed.message["html_body"]
    for _ in range(12):
        reduced = head + b"\r\n" + _body_part(text, html, len(omitted))
        if len(reduced) <= cap:
            return Reduced(reduced, omitted, text, html)
        over = len(reduced) - cap
        if html:
            html = html[: max(0, len(html) - over - 1024)] or None
        elif text:
            text = text[: max(0, len(text) - over - 1024)]
        else:
            head = head[: max(0, len(head) - over - 1024)]
    return Reduced((head + b"\r\n" + _body_part("", None, len(omitted)))[:cap], omitted, "", None)
