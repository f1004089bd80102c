"""How much work one inbound message may cause, and text made storable (docs/security.md).

Anyone can send mail, so the MIME reader bounds what a message can make it do:

* ``MAX_DEPTH`` nested MIME entities and ``MAX_PARTS`` entities in all. The parser stops at the
  first entity past either bound; what it read up to there is kept (``Loaded.bound`` names the
  bound) and the caller stores the message reduced, like mail above the persist cap.
* ``MAX_HEADER_CHARS`` of one header value are kept, the rest is cut (``HeaderTooLong``).
* The standard library's header parser costs time that grows faster than the value's length
  (each encoded word re-scans the rest of the value) and is heavy per parameter, so it only
  reads the top-level message's headers, and only a ``PARSE_CHARS`` prefix of each (enough for
  a 998-character subject in any charset). A nested part's headers are read as plain text by
  the legacy (compat32) parameter code: ``PART_HEADER_CHARS`` of each value while the
  message's ``PART_HEADER_BUDGET`` lasts, ``PART_HEADER_TAIL`` after that. Each part reads a
  header once (cached). Every header is then a bounded cost, and a whole message costs time
  linear in its size.

``storable`` makes any string Postgres can store (NUL and lone surrogates become U+FFFD);
``capped`` and ``safe_filename`` bound what lists and downloads show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email import errors
from email.feedparser import BytesFeedParser
from email.message import EmailMessage
from email.policy import EmailPolicy
from typing import Any

MAX_WIRE_BYTES = 25 * 1024 * 1024  # above this an inbound message is refused for good
MAX_DEPTH = 50
MAX_PARTS = 1000
MAX_HEADER_CHARS = 64 * 1024
PARSE_CHARS = 8 * 1024
PART_HEADER_CHARS = 1024
PART_HEADER_BUDGET = 64 * 1024
PART_HEADER_TAIL = 256
DISPLAY_CHARS = 998  # RFC 5322's line limit: subject, from, each address, message ids
MAX_ADDRESSES = 100  # per address header (to, cc, bcc, reply-to); also the references kept
FILENAME_CHARS = 255
CONTENT_TYPE_CHARS = 255
DISPOSITION_CHARS = 32

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_UNFOLD = re.compile(r"\r?\n[ \t]*")
_MISSING = object()


class HeaderTooLong(errors.HeaderDefect):
    """A header value longer than MAX_HEADER_CHARS; it was cut."""


class OverBounds(Exception):
    """The message went past MAX_DEPTH or MAX_PARTS; ``args[0]`` names the bound."""


class _Budget:
    """One parse's part counter and header-parse allowance; it makes the parts."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.parts = 0
        self.header_left = PART_HEADER_BUDGET
        self.root: _Part | None = None

    def __call__(self, policy: Any = None) -> _Part:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise OverBounds("TooManyParts")
        part = _Part(policy=policy)
        part.budget = self
        if self.root is None:
            self.root = part
        return part

    def header(self, part: _Part, name: str, value: Any) -> Any:
        """What ``part.get(name)`` answers for a raw value: a parsed header object for the
        top-level message, plain text for a nested part."""
        if not isinstance(value, str):
            return value
        if part is self.root:
            return part.policy.header_fetch_parse(name, value[:PARSE_CHARS])
        value = value[: PART_HEADER_CHARS if self.header_left > 0 else PART_HEADER_TAIL]
        self.header_left -= len(value)
        return _UNFOLD.sub(" ", value).strip()


class _Part(EmailMessage):
    """A parsed part that knows its depth, keeps header values bounded and parses each once."""

    depth = 0
    budget: _Budget | None = None

    def _forget(self) -> None:
        self.__dict__.pop("_parsed", None)

    def set_raw(self, name: str, value: Any) -> None:
        if isinstance(value, str) and len(value) > MAX_HEADER_CHARS:
            value = value[:MAX_HEADER_CHARS]
            self.defects.append(HeaderTooLong(name))
        self._forget()
        super().set_raw(name, value)

    def __setitem__(self, name: str, value: Any) -> None:
        self._forget()
        super().__setitem__(name, value)

    def __delitem__(self, name: str) -> None:
        self._forget()
        super().__delitem__(name)

    def replace_header(self, name: str, value: Any) -> None:
        self._forget()
        super().replace_header(name, value)

    def get(self, name: str, failobj: Any = None) -> Any:
        parsed = self.__dict__.setdefault("_parsed", {})
        key = name.lower()
        if key not in parsed:
            got: Any = _MISSING
            for found, value in self.raw_items():
                if found.lower() == key:
                    if self.budget is None:
                        got = self.policy.header_fetch_parse(found, value)
                    else:
                        got = self.budget.header(self, found, value)
                    break
            parsed[key] = got  # not when the parse raised: the next read raises the same
        got = parsed[key]
        return failobj if got is _MISSING else got

    def is_attachment(self) -> bool:
        # The library's own reads an attribute of a parsed header; a nested part has text.
        return self.get_content_disposition() == "attachment"

    def attach(self, payload: Any) -> None:
        depth = self.depth + 1
        if depth > MAX_DEPTH:
            raise OverBounds("NestedTooDeep")
        payload.depth = depth
        super().attach(payload)


POLICY = EmailPolicy()


@dataclass
class Loaded:
    message: EmailMessage
    bound: str | None  # TooManyParts | NestedTooDeep | Unparseable, or None: read in full


def load(raw: bytes) -> Loaded:
    """The message within the bounds; never raises for any bytes."""
    budget = _Budget()
    parser = BytesFeedParser(budget, policy=POLICY)
    budget.reset()  # the parser made one part to probe the factory
    try:
        parser.feed(raw)
        return Loaded(parser.close(), None)
    except OverBounds as exc:
        assert budget.root is not None
        return Loaded(budget.root, str(exc.args[0]))
    except Exception:  # the standard library gave up (RecursionError, a bug): headers only
        return Loaded(load_headers(raw), "Unparseable")


def load_headers(raw: bytes) -> EmailMessage:
    budget = _Budget()
    parser = BytesFeedParser(budget, policy=POLICY)
    budget.reset()
    parser._set_headersonly()  # type: ignore[attr-defined]  # the body stays one string
    try:
        parser.feed(raw)
        return parser.close()
    except Exception:
        return EmailMessage(policy=POLICY)


def _storable_text(text: str) -> str:
    if not _UNSTORABLE.search(text):
        return text
    text = text.replace("\x00", "\ufffd")
    try:  # bytes the parser smuggled through as surrogate escapes: read them as UTF-8
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        pass
    return _SURROGATE.sub("\ufffd", text)


def storable(value: Any) -> Any:
    """``value`` with every string (in dicts and lists too) storable by Postgres."""
    if isinstance(value, str):
        return _storable_text(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def capped(text: str | None, limit: int = DISPLAY_CHARS) -> str | None:
    """At most ``limit`` characters, the cut marked with an ellipsis."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def safe_filename(name: str | None) -> str | None:
    """A filename fit for a header and a disk: no control characters, no path, bounded."""
    if name is None:
        return None
    name = _CONTROL.sub(" ", _storable_text(name)).replace("/", "_").replace("\\", "_")
    name = name.strip(" .")
    return capped(name, FILENAME_CHARS) or None
