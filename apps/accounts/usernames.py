"""Username rules and the reserved-username set.

Design note: a username becomes a subdomain (``{username}.kody.run``) and a mail local part
(``{username}@``), so it must be a lowercase DNS label and must never spell a system mailbox.
The effective reserved set is ``(BUILT_IN ∪ added) − removed`` where ``added``/``removed`` come
from the operator override stored in durable KV under ``OVERRIDE_KEY``. ``removed`` can never
unreserve a system-email local or a ``kody``-prefixed built-in. A candidate is reserved when it
equals a token case-insensitively, or equals it once hyphens/underscores are stripped from both;
operator-added tokens and the built-in roots additionally match as substrings of the stripped
candidate. When the override is missing or unreadable, checks fail closed to the built-in list.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from kody.kv import store

logger = logging.getLogger(__name__)

OVERRIDE_KEY = "platform-settings:v1:reserved-usernames"
MIN_LENGTH = 3
MAX_LENGTH = 39
# A DNS label: letters, digits and single inner hyphens. Stored lowercase.
_USERNAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9]))*$")

# Mailboxes the operator-owned system mail graph answers; never claimable by a person.
SYSTEM_EMAIL_LOCALS = frozenset(
    {"kody", "support", "abuse", "postmaster", "security", "admin", "psl"}
)
# Substring roots: a username that merely contains one of these is still refused.
ROOTS = frozenset({"kody", "postmaster", "hostmaster", "webmaster", "mailerdaemon"})
BUILT_IN = frozenset(
    SYSTEM_EMAIL_LOCALS
    | ROOTS
    | {
        "kody-admin",
        "kody-bot",
        "kody-official",
        "kody-support",
        "kody-team",
        "kodyrun",
        "about",
        "account",
        "accounts",
        "administrator",
        "api",
        "app",
        "apps",
        "assets",
        "auth",
        "billing",
        "blog",
        "cdn",
        "community",
        "contact",
        "dashboard",
        "deleted-user",
        "dev",
        "docs",
        "email",
        "export",
        "ftp",
        "help",
        "hostmaster",
        "imap",
        "info",
        "legal",
        "login",
        "logout",
        "mail",
        "mcp",
        "me",
        "moderator",
        "news",
        "noreply",
        "no-reply",
        "null",
        "oauth",
        "official",
        "ops",
        "owner",
        "pop",
        "privacy",
        "root",
        "settings",
        "signup",
        "smtp",
        "staff",
        "static",
        "status",
        "system",
        "team",
        "terms",
        "test",
        "undefined",
        "usage",
        "user",
        "users",
        "verify",
        "webhooks",
        "www",
    }
)


def compact(token: str) -> str:
    return token.lower().replace("-", "").replace("_", "")


def _protected(token: str) -> bool:
    return token in SYSTEM_EMAIL_LOCALS or (token in BUILT_IN and token.startswith("kody"))


@dataclass(frozen=True)
class Override:
    added: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    updated_at: str = ""
    updated_by: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "added": sorted(self.added),
            "removed": sorted(self.removed),
            "updatedAt": self.updated_at,
            "updatedBy": self.updated_by,
        }


def _parse(raw: Any) -> Override:
    if not isinstance(raw, dict):
        raise ValueError("override is not an object")
    added, removed = raw.get("added", []), raw.get("removed", [])
    if not all(isinstance(t, str) for t in [*added, *removed]):
        raise ValueError("override tokens must be strings")
    return Override(
        added=frozenset(t.strip().lower() for t in added if t.strip()),
        removed=frozenset(t.strip().lower() for t in removed if t.strip()),
        updated_at=str(raw.get("updatedAt", "")),
        updated_by=str(raw.get("updatedBy", "")),
    )


def read_override() -> Override | None:
    """The stored override, or None when it is missing or unreadable (callers fail closed)."""
    try:
        raw = store.get_json(OVERRIDE_KEY)
        return None if raw is None else _parse(raw)
    except Exception:  # noqa: BLE001 — any failure here must fall back to the built-in list
        logger.warning("reserved-username override unreadable; using the built-in list")
        return None


def write_override(override: Override) -> None:
    store.put_json(OVERRIDE_KEY, override.as_json())


@dataclass(frozen=True)
class ReservedSet:
    exact: frozenset[str]
    substrings: frozenset[str]

    def matches(self, username: str) -> bool:
        name = username.lower()
        stripped = compact(name)
        if name in self.exact or stripped in {compact(t) for t in self.exact}:
            return True
        return any(root and root in stripped for root in (compact(t) for t in self.substrings))


def effective(override: Override | None) -> ReservedSet:
    if override is None:
        return ReservedSet(exact=BUILT_IN, substrings=ROOTS)
    removable = {t for t in override.removed if not _protected(t)}
    exact = (BUILT_IN | override.added) - removable
    substrings = (ROOTS - removable) | (override.added - removable)
    return ReservedSet(exact=frozenset(exact), substrings=frozenset(substrings))


def reserved_set() -> ReservedSet:
    return effective(read_override())


def is_reserved(username: str) -> bool:
    return reserved_set().matches(username)


def format_error(username: str) -> str | None:
    """A human-readable reason the name breaks the format rules, or None when it is fine."""
    if not MIN_LENGTH <= len(username) <= MAX_LENGTH:
        return f"Usernames are {MIN_LENGTH} to {MAX_LENGTH} characters long."
    if not _USERNAME_RE.match(username):
        return (
            "Use lowercase letters, digits and single hyphens; "
            "start and end with a letter or digit."
        )
    return None


def add_reserved(token: str, *, by_stable_user_id: str) -> Override:
    token = token.strip().lower()
    with store.locked(OVERRIDE_KEY):  # two operators' changes both land
        current = read_override() or Override()
        updated = Override(
            added=current.added | {token},
            removed=current.removed - {token},
            updated_at=timezone.now().isoformat(),
            updated_by=by_stable_user_id,
        )
        write_override(updated)
    return updated


def remove_reserved(token: str, *, by_stable_user_id: str) -> Override:
    token = token.strip().lower()
    if _protected(token):
        raise ValueError(f"{token!r} is a protected system name and cannot be unreserved")
    with store.locked(OVERRIDE_KEY):
        current = read_override() or Override()
        updated = Override(
            added=current.added - {token},
            removed=current.removed | ({token} if token in BUILT_IN else set()),
            updated_at=timezone.now().isoformat(),
            updated_by=by_stable_user_id,
        )
        write_override(updated)
    return updated
