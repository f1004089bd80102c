"""Data steps for UserMeter's part of the per-user schema (see kody.userschema.upgrades)."""

from __future__ import annotations

from typing import Any

from apps.entitlements.actor.common import META, USER_METER_VERSION
from apps.entitlements.actor.models import FULL_METER
from kody.userschema import retire_tables, upgrade_step


@upgrade_step(FULL_METER)
def record_meter_version(cursor: Any) -> None:
    """Schemas from before the full meter learn which meter version they now hold."""
    cursor.execute(
        f"INSERT INTO {META} (key, value) VALUES ('schema_version', %s)"
        f" ON CONFLICT (key) DO UPDATE SET value = GREATEST({META}.value, EXCLUDED.value)",
        [USER_METER_VERSION],
    )


# Version 7: two tables of the original's UserMeter that nothing in Kody writes or reads.
# ``dynamic_worker_days`` billed Cloudflare Dynamic Worker days (Kody runs none);
# ``inbound_mcp_connection_last_used`` is ``access_tokens.last_used_at`` here, debounced on
# the shared token row where the Connections page and Revoke already are.
RETIRED_TABLES = 7
retire_tables(RETIRED_TABLES, "dynamic_worker_days", "inbound_mcp_connection_last_used")
