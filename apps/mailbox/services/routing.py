"""Who an inbound recipient address belongs to (RFC 5233 sub-addressing).

``alice+anything@{KODY_MAIL_DOMAIN}`` is Alice's inbox: the tag is only an alias, even when
it spells a system local (``alice+postmaster@`` is still Alice's). A *base* local that is a
reserved system local goes to the operator's system inbox. The user is found by the indexed
username lookup, never by reverse-resolving stable ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parseaddr

from django.conf import settings

from apps.accounts.models import User
from apps.accounts.usernames import SYSTEM_EMAIL_LOCALS


@dataclass(frozen=True)
class Route:
    kind: str  # user | system | unknown
    base_local: str
    user: User | None = None


MAX_ADDRESS_CHARS = 320  # RFC 5321: a 64-octet local part, @, a 255-octet domain


def base_local(address: str) -> tuple[str, str]:
    """``("alice", "mail.example")`` for ``Alice+tag@Mail.Example``; empty parts if unusable
    (too long, or holding anything but printable text: never a lookup that cannot succeed)."""
    if len(address or "") > 4 * MAX_ADDRESS_CHARS:
        return "", ""
    _name, addr = parseaddr(address or "")
    local, sep, domain = addr.rpartition("@")
    if not sep or not local or len(addr) > MAX_ADDRESS_CHARS or not addr.isprintable():
        return "", ""
    return local.split("+", 1)[0].lower(), domain.lower().rstrip(".")


def resolve(recipient: str) -> Route:
    local, domain = base_local(recipient)
    if not local or domain != settings.KODY_MAIL_DOMAIN:
        return Route("unknown", local)
    if local in SYSTEM_EMAIL_LOCALS:
        return Route("system", local)
    user = User.objects.filter(username=local, is_active=True).first()
    if user is None:
        return Route("unknown", local)
    return Route("user", local, user)
