"""Client ID metadata documents fetched through ``kody.fetch`` (the one SSRF-safe fetcher).

The toolkit resolves an ``https`` client id to an application, caches it for the document's
``max-age`` (clamped) and validates it (its ``client_id`` must be the URL, public clients only,
redirect URIs required); this class only decides *how* the document is fetched: every hop
re-checked against private, loopback, link-local and metadata addresses, redirects included.
"""

from __future__ import annotations

import json
from typing import Any

from oauth2_provider.cimd import CIMDError, _effective_max_age, _validate_client_id_url
from oauth2_provider.settings import oauth2_settings

from kody.fetch import FetchRefused, safe_get


class KodyMetadataFetcher:
    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        _validate_client_id_url(client_id)
        try:
            fetched = safe_get(
                client_id,
                max_bytes=oauth2_settings.CIMD_MAX_DOCUMENT_SIZE,
                timeout=oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS,
                accept="application/json, application/*+json",
            )
        except FetchRefused as exc:
            raise CIMDError(str(exc)) from exc
        if fetched.status != 200:
            raise CIMDError(f"client_id document returned HTTP {fetched.status}")
        media = fetched.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json" and not (
            media.startswith("application/") and media.endswith("+json")
        ):
            raise CIMDError(f"client_id document is not JSON ({media!r})")
        try:
            document = json.loads(fetched.body)
        except ValueError as exc:
            raise CIMDError("client_id document is not valid JSON") from exc
        if not isinstance(document, dict):
            raise CIMDError("client_id document must be a JSON object")
        return document, _effective_max_age(fetched.headers.get("cache-control"))
