"""The coding guide served to agents (``codingGuideGet``): how to write Kody packages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kody.capabilities import Context, capability

GUIDE = Path(__file__).resolve().parent.parent / "guides" / "coding-guide.md"


@capability(
    name="codingGuideGet",
    domain="meta",
    title="How to write Kody code",
    description="A guide to writing execute code and Kody packages: exports, kody.*, fetch, "
    "secrets, storage, jobs, webhooks and the limits.",
)
def coding_guide_get(ctx: Context) -> dict[str, Any]:
    return {"guide": GUIDE.read_text(encoding="utf-8"), "format": "markdown"}
