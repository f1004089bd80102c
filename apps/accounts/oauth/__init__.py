"""OAuth 2.1 for ``/mcp`` on django-oauth-toolkit (docs/adr/0052): what the toolkit does not do
itself — the resource binding, consent, grants, sibling refresh within the reuse window, the
client ID metadata fetch through ``kody.fetch`` — lives here."""
