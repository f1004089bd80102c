"""/account/email: read and delete one's own mail, sanitized html with remote content blocked;
and the provider delivery webhook."""

from __future__ import annotations

import json
from email.message import EmailMessage

import pytest
from django.test import Client

from apps.mailbox.actor import Mailbox
from tests.mailbox.conftest import address, cap, deliver_cli, raw_blobs

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

PNG = b"\x89PNG\r\n\x1a\n fake png"


def html_mail(owner) -> str:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "news@shop.test", address(owner), "Weekly deals"
    msg.set_content("plain deals")
    msg.add_alternative(
        '<p onclick="steal()">Deals<script>alert(1)</script>'
        '<img src="https://tracker.test/pixel.gif"><img src="cid:logo@shop"></p>',
        subtype="html",
    )
    msg.get_payload()[1].add_related(PNG, "image", "png", cid="<logo@shop>", filename="logo.png")
    return deliver_cli(msg.as_bytes(), address(owner), "page-1")["messageId"]


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_reads_sanitized_html_with_remote_content_blocked(owner):
    message_id = html_mail(owner)
    client = signed_in(owner)
    listing = client.get("/account/email")
    assert listing.status_code == 200 and "Weekly deals" in listing.content.decode()
    page = client.get(f"/account/email/messages/{message_id}").content.decode()
    assert "Deals" in page
    assert "<script" not in page.split('data-testid="message-html"')[1]
    assert "tracker.test" not in page and "onclick" not in page
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=message_id)
    logo = next(a for a in got["attachments"] if a["filename"] == "logo.png")
    inline_url = f"/account/email/messages/{message_id}/attachments/{logo['id']}"
    assert f'src="{inline_url}"' in page
    image = client.get(inline_url)
    assert image.status_code == 200 and image.content == PNG
    assert image["Content-Type"] == "image/png" and image["X-Content-Type-Options"] == "nosniff"


def test_the_owner_deletes_from_the_page(owner):
    message_id = html_mail(owner)
    client = signed_in(owner)
    response = client.post(f"/account/email/messages/{message_id}/delete")
    assert response.status_code == 302
    assert Mailbox.call(owner.stable_user_id, "count")["messages"] == 0
    assert raw_blobs(owner) == []


def test_an_outsider_gets_not_found_for_every_page_of_the_owners_message(owner, outsider):
    message_id = html_mail(owner)
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=message_id)
    client = signed_in(outsider)
    assert "Weekly deals" not in client.get("/account/email").content.decode()
    assert "Weekly deals" not in client.get("/account/email?q=deals").content.decode()
    for url in (
        f"/account/email/messages/{message_id}",
        f"/account/email/messages/{message_id}/attachments/{got['attachments'][0]['id']}",
    ):
        response = client.get(url)
        assert response.status_code == 404 and b"Weekly deals" not in response.content
    assert client.post(f"/account/email/messages/{message_id}/delete").status_code == 404
    assert Mailbox.call(owner.stable_user_id, "count")["messages"] == 1


def test_signed_out_visitors_are_sent_to_sign_in():
    response = Client().get("/account/email")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_delivery_webhook_updates_status_through_the_index_only(owner, owner_key):
    sent = cap(owner_key, "emailSend", {"to": ["b@example.org"], "subject": "s", "text": "t"})
    provider_id = sent.json()["providerMessageId"]
    client = Client(HTTP_X_KODY_INBOUND_SECRET="inbound-secret-for-tests")
    body = {"provider": "django", "providerMessageId": provider_id, "eventType": "bounced",
            "eventId": "ev-1"}  # fmt: skip
    response = client.post("/inbound/email-events", json.dumps(body), "application/json")
    assert response.json() == {"recorded": True}
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=sent.json()["messageId"])
    assert got["deliveryStatus"] == "bounced"
    replay = client.post("/inbound/email-events", json.dumps(body), "application/json")
    assert replay.json() == {"recorded": False}
    unknown = {**body, "providerMessageId": "<nobody@x>", "eventId": "ev-2"}
    response = client.post("/inbound/email-events", json.dumps(unknown), "application/json")
    assert response.status_code == 200 and response.json() == {"recorded": False}
    denied = Client().post("/inbound/email-events", json.dumps(body), "application/json")
    assert denied.status_code == 401
    bad = client.post("/inbound/email-events", "{}", "application/json")
    assert bad.status_code == 400
