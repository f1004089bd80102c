"""The status of the person's remote connectors, for agents: which are registered, enabled,
attached to their sessions, connected now, and what tools each offered at its last hello."""

from __future__ import annotations

from typing import Any

from apps.packages.services import remote_connectors
from kody.capabilities import Context, capability


@capability(
    name="metaListRemoteConnectorStatus",
    domain="meta",
    title="List remote connector status",
    description=(
        "Your remote connectors (programs you run that connect out to Kody, e.g. at home): "
        "whether each is enabled, attached, connected now, last seen, and its tools. Register "
        "or change them at /account/remote-connectors."
    ),
)
def meta_list_remote_connector_status(ctx: Context) -> Any:
    return {"connectors": remote_connectors.listing(ctx.user_id)}
