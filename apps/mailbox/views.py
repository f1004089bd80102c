"""HTTP doors of the mailbox: the provider's inbound webhook and the account mail pages."""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from apps.mailbox.services import inbound, mime
from kody.errors import KodyError

log = logging.getLogger(__name__)
SECRET_HEADER = "HTTP_X_KODY_INBOUND_SECRET"


def _error(exc: KodyError) -> JsonResponse:
    return JsonResponse({"error": exc.as_dict()}, status=exc.status)


def _authorized(request: HttpRequest) -> bool:
    secret = settings.KODY_INBOUND_EMAIL_SECRET
    given = request.META.get(SECRET_HEADER, "")
    return bool(secret) and hmac.compare_digest(given.encode(), secret.encode())


@csrf_exempt
@require_POST
def inbound_email(request: HttpRequest) -> JsonResponse:
    """``POST /inbound/email?to=ADDRESS&deliveryId=ID`` with the raw MIME as the body.

    ``X-Kody-Inbound-Secret`` must equal ``KODY_INBOUND_EMAIL_SECRET``. 200 with
    ``{"status", "messageId", "reason"}`` for received/rejected/duplicate; 503 (retry with the
    same delivery id) when storage or the mailbox is unavailable.
    """
    if not _authorized(request):
        return JsonResponse(
            {"error": {"code": "unauthenticated", "message": "Bad inbound secret.", "details": {}}},
            status=401,
        )
    recipient = request.GET.get("to") or request.headers.get("X-Kody-Recipient", "")
    delivery_id = request.GET.get("deliveryId") or request.headers.get("X-Kody-Delivery-Id")
    envelope_from = request.GET.get("from") or request.headers.get("X-Kody-Envelope-From")
    if not recipient:
        return JsonResponse(
            {"error": {"code": "bad_request", "message": "Name the recipient.", "details": {}}},
            status=400,
        )
    try:
        # Not request.body: that refuses anything over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB).
        raw = request.read(mime.MAX_WIRE_BYTES + 1)
        outcome = inbound.deliver(raw, recipient, delivery_id, envelope_from)
    except KodyError as exc:
        if exc.status < 500:
            return _error(exc)
        return _error(inbound.InboundRetry(details=exc.details))
    return JsonResponse(outcome.as_json())
