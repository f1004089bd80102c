"""What imported community rows may not bring (``apps.accounts.importing``): trust and
featuring are the old instance's moderators' decisions, so a listing arrives without them."""

from __future__ import annotations

from typing import Any

from apps.accounts.importing import ImportContext, import_rule


@import_rule("community_listings")
def listing(values: dict[str, Any], ctx: ImportContext) -> dict[str, Any]:
    values.update(trusted_commit=None, trusted_by_user_id=None, trusted_at=None, featured_at=None)
    return values
