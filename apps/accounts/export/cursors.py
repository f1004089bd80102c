"""Export cursors: signed, and bound to the user and the section they were issued for.

Another user's cursor, one from another section, or one that was tampered with is refused with
``invalid_cursor``; inside, a cursor holds only the position to resume from.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from apps.accounts.ownership import Owner
from kody.errors import KodyError

_SALT = "kody.account-export.v1"


class InvalidCursor(KodyError):
    code = "invalid_cursor"
    status = 400
    message = "The cursor is not valid for this account and section; restart the section."


def seal(owner: Owner, section_name: str, position: Any) -> str:
    return signing.dumps({"u": owner.stable_id, "s": section_name, "p": position}, salt=_SALT)


def unseal(owner: Owner, section_name: str, token: str | None) -> Any:
    if not token:
        return None
    try:
        data = signing.loads(token, salt=_SALT)
    except signing.BadSignature as exc:
        raise InvalidCursor() from exc
    if data.get("u") != owner.stable_id or data.get("s") != section_name:
        raise InvalidCursor()
    return data.get("p")
