"""The Kody tips opt-out: a toggle on /account/settings for the signed-in person only, and a
signed one-click link (plus RFC 8058 headers) in every tips mail whose GET changes nothing.
Opted out, the campaign lane sends no tips; the entitlement warning still goes out."""

from __future__ import annotations

import re
from email import message_from_bytes
from urllib.parse import urlsplit

import pytest
from django.core import mail, signing
from django.test import Client
from django.utils import timezone

from apps.accounts import campaigns
from apps.accounts.models import User, UserTipsEmailOptOut
from apps.accounts.services import tips
from apps.entitlements.services import usage

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SETTINGS = "/account/settings"
TOGGLE = "/account/settings/tips-email"
UNSUBSCRIBE = "/account/tips/unsubscribe"


def opted_out(user: User) -> bool:
    return UserTipsEmailOptOut.objects.filter(user_id=user.stable_user_id).exists()


def sweep() -> None:
    campaigns.sweep("", 500, lambda: False)


def connect_agent(user: User) -> None:
    user.first_mcp_connected_at = timezone.now()
    user.save()


def mails_to(user: User) -> list[mail.EmailMessage]:
    return [m for m in mail.outbox if user.email in m.to]


def tips_mail_for(user: User) -> mail.EmailMessage:
    """A real campaign mail: the first look records, the next state mails once."""
    sweep()
    connect_agent(user)
    sweep()
    [message] = mails_to(user)
    return message


def relative(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def body_link(message: mail.EmailMessage) -> str:
    match = re.search(r"https?://\S+" + re.escape(UNSUBSCRIBE) + r"\?token=\S+", message.body)
    assert match, message.body
    return relative(match.group(0))


# --- the settings toggle ---------------------------------------------------------------------


def test_the_owner_turns_tips_off_and_back_on(owner: User, owner_client: Client) -> None:
    page = owner_client.get(SETTINGS).content.decode()
    assert 'id="tips"' in page
    assert '<input type="radio" name="tips_email" value="on" checked>' in page

    response = owner_client.post(TOGGLE, {"tips_email": "off"})
    assert response.status_code == 302 and response["Location"] == SETTINGS
    assert opted_out(owner)
    page = owner_client.get(SETTINGS).content.decode()
    assert '<input type="radio" name="tips_email" value="off" checked>' in page
    assert "You will get no Kody tips mail." in page

    # Saving "off" again keeps the first stamp.
    stamp = UserTipsEmailOptOut.objects.get(user_id=owner.stable_user_id).opted_out_at
    owner_client.post(TOGGLE, {"tips_email": "off"})
    assert UserTipsEmailOptOut.objects.get(user_id=owner.stable_user_id).opted_out_at == stamp

    owner_client.post(TOGGLE, {"tips_email": "on"})
    assert not opted_out(owner)


def test_the_toggle_changes_only_the_signed_in_person(
    owner: User, outsider: User, outsider_client: Client
) -> None:
    # A user id in the form is ignored: the preference is always the requester's own.
    outsider_client.post(TOGGLE, {"tips_email": "off", "user_id": owner.stable_user_id})
    assert opted_out(outsider) and not opted_out(owner)
    tips.set_opted_out(owner, True)
    outsider_client.post(TOGGLE, {"tips_email": "on", "user_id": owner.stable_user_id})
    assert opted_out(owner) and not opted_out(outsider)


def test_a_bad_choice_is_refused_with_a_code_and_nothing_changes(
    owner: User, owner_client: Client
) -> None:
    for bad in ({}, {"tips_email": "maybe"}, {"tips_email": "OFF"}):
        response = owner_client.post(TOGGLE, bad)
        assert response.status_code == 422
        assert b"invalid_input" in response.content
    assert not opted_out(owner)


def test_signed_out_the_toggle_writes_nothing(owner: User, client: Client) -> None:
    response = client.post(TOGGLE, {"tips_email": "off"})
    assert response.status_code == 302 and "/login" in response["Location"]
    assert not UserTipsEmailOptOut.objects.exists()


def test_the_toggle_is_refused_while_the_account_is_deleted(
    owner: User, owner_client: Client
) -> None:
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    response = owner_client.post(TOGGLE, {"tips_email": "off"})
    assert response.status_code == 409 and b"account_deleting" in response.content
    assert not opted_out(owner)


# --- the mail and its link -------------------------------------------------------------------


def test_every_tips_mail_carries_the_link_and_one_click_headers(owner: User) -> None:
    message = tips_mail_for(owner)
    assert message.subject == "Save your first package"
    link = body_link(message)
    header = message.extra_headers["List-Unsubscribe"]
    assert header.startswith("<http") and header.endswith(">")
    assert relative(header[1:-1]) == link
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    # The headers survive into the message the backend hands to SMTP.
    wire = message_from_bytes(message.message().as_bytes())
    assert wire["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "".join(str(wire["List-Unsubscribe"]).split()) == header
    assert tips.user_for_token(link.split("token=", 1)[1]) == owner


def test_the_warning_carries_no_unsubscribe_link(owner: User, frozen_clock: object) -> None:
    sweep()
    usage.record_usage(owner.stable_user_id, "email_sends_per_day", count=9)
    sweep()
    [warning] = mails_to(owner)
    assert warning.subject == "You are close to a Kody plan limit"
    assert UNSUBSCRIBE not in warning.body
    assert "List-Unsubscribe" not in warning.extra_headers


def test_get_shows_a_confirm_page_and_changes_nothing(owner: User, client: Client) -> None:
    link = body_link(tips_mail_for(owner))
    for _ in range(3):  # a scanner and a preview fetch the link before the person does
        page = client.get(link)
        assert page.status_code == 200
        assert b"Stop tips mail</button>" in page.content
    assert not opted_out(owner)


def test_confirming_opts_out_and_the_lane_then_sends_no_tips(owner: User, client: Client) -> None:
    link = body_link(tips_mail_for(owner))
    token = link.split("token=", 1)[1]
    done = client.post(UNSUBSCRIBE, {"token": token})
    assert done.status_code == 200 and b"Tips mail stopped" in done.content
    assert opted_out(owner)
    assert b"already gets no tips mail" in client.get(link).content

    mail.outbox.clear()
    owner.first_mcp_connected_at = None  # a new state would mail, were tips on
    owner.save()
    sweep()
    assert mails_to(owner) == []


def test_the_mail_clients_one_click_post_works_without_a_session_or_csrf(owner: User) -> None:
    message = tips_mail_for(owner)
    url = relative(message.extra_headers["List-Unsubscribe"][1:-1])
    provider = Client(enforce_csrf_checks=True)
    response = provider.post(
        url, "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    assert opted_out(owner)
    assert provider.post(url, {"List-Unsubscribe": "One-Click"}).status_code == 200  # repeat


def test_one_persons_link_never_opts_out_another(
    owner: User, outsider: User, outsider_client: Client
) -> None:
    token = tips.unsubscribe_token(owner)
    # Signed in as someone else, the link still names only its own account.
    outsider_client.post(UNSUBSCRIBE, {"token": token})
    assert opted_out(owner) and not opted_out(outsider)


def _tampered(token: str) -> str:
    payload, rest = token.split(":", 1)
    flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
    return f"{flipped}:{rest}"


def test_forged_or_tampered_tokens_are_refused_with_a_code(owner: User, outsider: User) -> None:
    client = Client()
    good = tips.unsubscribe_token(owner)
    deleted = User(pk=987654, stable_user_id="f" * 64)
    forged = [
        "",
        "not-a-token",
        _tampered(good),
        good + "x",
        # Signed by this server, but for another purpose.
        signing.dumps({"i": outsider.pk, "u": outsider.stable_user_id}, salt="kody.other"),
        # The owner's row id with the outsider's stable id.
        signing.dumps({"i": owner.pk, "u": outsider.stable_user_id}, salt=tips.SALT),
        tips.unsubscribe_token(deleted),
        "x" * 600,
    ]
    for token in forged:
        posted = client.post(UNSUBSCRIBE, {"token": token})
        assert posted.status_code == 400, token
        assert b"invalid_token" in posted.content
        assert client.get(UNSUBSCRIBE, {"token": token}).status_code == 400
    assert not UserTipsEmailOptOut.objects.exists()


def test_the_link_is_refused_while_the_account_is_deleted(owner: User) -> None:
    token = tips.unsubscribe_token(owner)
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    response = Client().post(UNSUBSCRIBE, {"token": token})
    assert response.status_code == 409 and b"account_deleting" in response.content
    assert not opted_out(owner)


def test_opting_back_in_brings_tips_back(owner: User, owner_client: Client) -> None:
    sweep()
    Client().post(UNSUBSCRIBE, {"token": tips.unsubscribe_token(owner)})
    connect_agent(owner)
    sweep()
    assert mails_to(owner) == []
    owner_client.post(TOGGLE, {"tips_email": "on"})
    owner.first_mcp_connected_at = None
    owner.save()
    sweep()
    assert [m.subject for m in mails_to(owner)] == ["Connect your first agent to Kody"]
