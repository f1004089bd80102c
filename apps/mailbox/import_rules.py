"""What imported mail settings may not bring (``apps.accounts.importing``).

A sender identity is permission to send as an address. Nothing in an archive proves the
address here: the account's own platform address is provisioned verified again on first use
(``inboxes.ensure_sender_identity``), any other address on this instance's mail domain (a
reserved system local, another person's address) refuses the import, and an outside address
is left out until its owner verifies it here. An inbox address on the mail domain must be
the account's own.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from apps.accounts.importing import ImportContext, ImportRefused, import_rule
from apps.mailbox.services.routing import base_local


def _own_platform_address(address: str, ctx: ImportContext, what: str) -> bool:
    """True for the account's own address on the mail domain (under its username here or in
    the archive); refuses any other address there."""
    local, domain = base_local(address)
    if not local or not domain:
        raise ImportRefused(f"{what} {address[:120]!r} is not an address")
    if domain != settings.KODY_MAIL_DOMAIN.lower():
        return False
    if local not in (ctx.username, ctx.old_username):
        raise ImportRefused(
            f"{what} {address[:120]!r} is a reserved or platform address of this instance"
        )
    return True


@import_rule("email_sender_identities")
def sender_identity(values: dict[str, Any], ctx: ImportContext) -> None:
    address = str(values.get("email") or "")
    if not _own_platform_address(address, ctx, "sender identity"):
        ctx.warn(f"email_sender_identities: {address[:120]} not imported; verify it again here")
    return None  # the platform address is provisioned verified again on first use


@import_rule("email_inbox_addresses")
def inbox_address(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    address = str(values.get("address") or "")
    if _own_platform_address(address, ctx, "inbox address"):
        values["address"] = f"{ctx.username}@{settings.KODY_MAIL_DOMAIN}"
        values["local_part"] = ctx.username
        values["domain"] = settings.KODY_MAIL_DOMAIN
    return values
