"""``POST /api/v1/packages/<packageId>/exports/<exportName>``: an export run with an invocation
token (not a user's bearer token), outside the capability API."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from apps.packages.services import invocations
from kody.errors import KodyError


@csrf_exempt
@require_POST
def invoke_export(request: HttpRequest, package_id: str, export_name: str) -> JsonResponse:
    auth = request.headers.get("Authorization", "")
    raw = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    try:
        status, reply, replayed = invocations.invoke(
            raw, package_id, export_name, request.body, request.headers.get("Idempotency-Key")
        )
    except KodyError as exc:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    response = JsonResponse(reply, status=status)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


@csrf_exempt
@require_POST
def webhook_ingress(
    request: HttpRequest, username: str, kody_id: str, name: str, secret: str
) -> JsonResponse:
    from apps.packages.services import webhooks

    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        webhooks.deliver(username, kody_id, name, secret, request.body, headers)
    except KodyError as exc:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    return JsonResponse({"ok": True})
