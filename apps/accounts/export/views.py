"""``GET /account/export.json``: the signed-in person's export manifest (no rows, no bytes)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps.accounts.export import service


@never_cache
@login_required
@require_GET
def export_manifest(request: HttpRequest) -> JsonResponse:
    response = JsonResponse(service.manifest(request.user), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="kody-export-manifest.json"'
    # The page is the manifest only; rows, actor state and bytes come through the capabilities.
    response["X-Kody-Export-Completeness"] = "manifest-only"
    return response
