"""Sanitized message html for the account UI: scripts, styles and handlers removed, and
remote content blocked (only ``cid:`` images render, rewritten to the owner's attachment
URL), so opening a message never tells its sender anything."""

from __future__ import annotations

from collections.abc import Callable

import nh3

_URL_ATTRS = {("img", "src"), ("img", "srcset"), ("source", "src"), ("source", "srcset")}


def sanitize(html: str, cid_url: Callable[[str], str | None]) -> str:
    def keep(tag: str, attr: str, value: str) -> str | None:
        if (tag, attr) in _URL_ATTRS:
            if value.lower().startswith("cid:"):
                return cid_url(value[4:])
            return None  # remote (or data:) image: blocked
        if attr in ("background", "style") or value.lower().startswith("cid:"):
            return None
        return value

    return nh3.clean(
        html,
        attribute_filter=keep,
        url_schemes={"http", "https", "mailto", "cid"},  # cid: is rewritten or dropped above
        link_rel="noopener noreferrer nofollow",
    )
