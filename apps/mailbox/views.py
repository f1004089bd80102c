"""HTTP doors of the mailbox: the provider's inbound webhook and the account mail pages."""

from __future__ import annotations

import base64
import hmac
import json
import logging
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.page_writes import guarded_page_write
from apps.mailbox.services import bounds, inbound, inboxes, mime, outbound, reads
from apps.mailbox.services.html import sanitize
from kody.capabilities.text import check_text
from kody.errors import BadRequest, InvalidInput, KodyError
from kody.outage import unavailable

log = logging.getLogger(__name__)
SECRET_HEADER = "HTTP_X_KODY_INBOUND_SECRET"
PAGE = 50
DELIVERY_EVENTS = {"delivered", "deferred", "bounced", "complained", "failed"}
INLINE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


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
        return _retry(exc.details)
    except Exception as exc:
        down = unavailable(exc)
        if down is None:
            # Parsing never raises, so anything else failed at a retryable step: the provider
            # delivers again, never a bare 500.
            log.exception("inbound delivery %s failed at a retryable step", delivery_id)
            return _retry({})
        log.warning("inbound delivery deferred: %s (%s)", down.code, type(exc).__name__)
        return _retry({"reason": down.code}, down.retry_after_seconds)
    return JsonResponse(outcome.as_json())


def _retry(details: dict[str, Any], retry_after: int = 5) -> JsonResponse:
    """503: nothing was stored (or it was, under the same delivery id); the provider delivers
    again after ``Retry-After`` seconds."""
    response = _error(inbound.InboundRetry(details=details))
    response["Retry-After"] = str(retry_after)
    return response


# --- /account/email: read and delete one's own mail ------------------------------------------


def _account_user(request: HttpRequest) -> Any:
    return request.user


@login_required
@require_GET
def account_email(request: HttpRequest) -> HttpResponse:
    user = _account_user(request)
    query = request.GET.get("q", "").strip()[:200]
    cursor = request.GET.get("cursor") or None
    try:
        if query:
            page = reads.search(user, query, limit=PAGE, cursor=cursor)
        else:
            page = reads.list_messages(user, limit=PAGE, cursor=cursor)
    except KodyError as exc:
        return render(request, "mailbox/problem.html", {"error": exc}, status=exc.status)
    context = {
        "messages_page": page["messages"],
        "next_cursor": page["nextCursor"],
        "query": query,
        "address": inboxes.address_of(user),
    }
    return render(request, "mailbox/list.html", context)


@login_required
@require_GET
def account_email_message(request: HttpRequest, message_id: str) -> HttpResponse:
    user = _account_user(request)
    try:
        message = reads.get_message(user, message_id)
    except KodyError as exc:
        return render(request, "mailbox/problem.html", {"error": exc}, status=exc.status)
    by_cid = {
        (a["contentId"] or "").strip("<>"): a["id"]
        for a in message["attachments"]
        if a["contentId"] and a["storageKind"] != "unavailable"
    }

    def cid_url(cid: str) -> str | None:
        att = by_cid.get(cid.strip("<>"))
        return reverse("mailbox:account_attachment", args=[message_id, att]) if att else None

    html = sanitize(message["htmlBody"], cid_url) if message["htmlBody"] else None
    return render(request, "mailbox/message.html", {"message": message, "safe_html": html})


@login_required
@require_POST
@guarded_page_write
def account_email_delete(request: HttpRequest, message_id: str) -> HttpResponse:
    try:
        reads.delete_message(_account_user(request), message_id)
    except KodyError as exc:
        return render(request, "mailbox/problem.html", {"error": exc}, status=exc.status)
    messages.success(request, "Message deleted.")
    return redirect("mailbox:account_email")


@login_required
@require_GET
def account_attachment(request: HttpRequest, message_id: str, attachment_id: str) -> HttpResponse:
    try:
        found = reads.attachment(_account_user(request), message_id, attachment_id)
    except KodyError as exc:
        return render(request, "mailbox/problem.html", {"error": exc}, status=exc.status)
    inline = found["contentType"] in INLINE_TYPES
    response = HttpResponse(
        base64.b64decode(found["contentBase64"]),
        content_type=found["contentType"] if inline else "application/octet-stream",
    )
    # Rows stored before names were cleaned at parse time can still hold CR/LF: clean again.
    filename = bounds.safe_filename(found["filename"]) or "attachment"
    response["Content-Disposition"] = content_disposition_header(not inline, filename)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@csrf_exempt
@require_POST
def delivery_webhook(request: HttpRequest) -> JsonResponse:
    """A provider's delivery event, JSON ``{provider, providerMessageId, eventType, eventId,
    detail}``. The owner is found through the provider index only; an unknown id is a 200
    no-op (logged), so the provider never retries it forever."""
    if not _authorized(request):
        return JsonResponse(
            {"error": {"code": "unauthenticated", "message": "Bad inbound secret.", "details": {}}},
            status=401,
        )
    try:
        body = json.loads(request.body or b"{}")
        check_text(body)  # the JSON body is this door's own: NUL in it is refused like a query's
        event_type = str(body["eventType"])
        provider, provider_id = str(body["provider"]), str(body["providerMessageId"])
    except InvalidInput as exc:
        return _error(exc)
    except (ValueError, KeyError, TypeError):
        return _error(BadRequest("Expected provider, providerMessageId and eventType."))
    if event_type not in DELIVERY_EVENTS:
        return _error(BadRequest(details={"eventType": event_type}))
    event_id = body.get("eventId")
    recorded = outbound.record_provider_event(
        provider, provider_id, event_type, str(event_id) if event_id else None,
        body.get("detail") if isinstance(body.get("detail"), dict) else None,
    )  # fmt: skip
    return JsonResponse({"recorded": recorded})
