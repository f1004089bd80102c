"""Referrals end to end: the ``kody_ref`` cookie (a week, last wins), the signup-time row, and
the invoice-gated reward — granted once however often Stripe delivers the webhook, and held
while the referee's address is unverified."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.accounts.models import Referral, User
from apps.accounts.services import identity, referrals
from apps.entitlements.plans import Plan
from apps.entitlements.services import billing
from apps.entitlements.services.plan_cache import cached_plan
from tests.accounts.factories import PASSWORD
from tests.concurrency import in_threads
from tests.entitlements.test_billing import event, post_webhook

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _no_refresh(settings):
    settings.STRIPE_SECRET_KEY = ""  # the plan refresh has its own tests; here Stripe is off
    settings.STRIPE_WEBHOOK_SECRET = "whsec_test_fake"
    with (
        mock.patch.object(billing, "arm_plan_refresh"),
        mock.patch.object(billing, "refresh_plan_unsafe_in_transaction"),
    ):
        yield


def sign_up(client: Client, capture, name: str) -> User:
    with capture(execute=True):
        response = client.post(
            "/signup", {"email": f"{name}@example.org", "username": name, "password": PASSWORD}
        )
    assert response.status_code == 302, response.content
    return User.objects.get(username=name)


def paid(referee: User, invoice: str, amount: int = 900) -> dict:
    User.objects.filter(pk=referee.pk).update(stripe_customer_id=f"cus_{referee.username}")
    return event(
        f"evt_{invoice}",
        "invoice.paid",
        {"object": "invoice", "id": invoice, "customer": f"cus_{referee.username}",
         "amount_paid": amount, "period_end": int(timezone.now().timestamp()) + 30 * 86400},
    )  # fmt: skip


def verify(referee: User) -> None:
    [message] = [m for m in mail.outbox if referee.email in m.to]
    token = message.body.split("token=", 1)[1].split()[0]
    identity.verify_email(token)


def test_the_cookie_is_a_week_long_and_the_last_link_wins(client, owner, outsider):
    client.get(f"/?ref={owner.username}")
    first = client.cookies[referrals.COOKIE]
    assert first["max-age"] == 7 * 86400 and first["httponly"]
    client.get(f"/?ref={outsider.username}")
    assert client.cookies[referrals.COOKIE].value != first.value
    assert outsider.username in client.cookies[referrals.COOKIE].value


def test_signup_with_the_cookie_records_the_referral(
    client, owner, outsider, django_capture_on_commit_callbacks
):
    client.get(f"/?ref={owner.username}")
    client.get(f"/?ref={outsider.username}")  # last wins
    referee = sign_up(client, django_capture_on_commit_callbacks, "newbie")
    row = Referral.objects.get(referee_stable_user_id=referee.stable_user_id)
    assert row.referrer_stable_user_id == outsider.stable_user_id and row.status == "pending"


def test_a_forged_or_unknown_referrer_records_nothing(client, django_capture_on_commit_callbacks):
    client.cookies[referrals.COOKIE] = "ada"  # not signed by us
    sign_up(client, django_capture_on_commit_callbacks, "forger")
    client2 = Client()
    client2.get("/?ref=nobody-here")
    sign_up(client2, django_capture_on_commit_callbacks, "lonely")
    assert not Referral.objects.exists()


def test_two_deliveries_of_the_paid_invoice_reward_once(
    client, owner, django_capture_on_commit_callbacks, frozen_clock
):
    client.get(f"/?ref={owner.username}")
    referee = sign_up(client, django_capture_on_commit_callbacks, "payer")
    verify(referee)
    payload = paid(referee, "in_1")
    for _ in range(2):
        assert post_webhook(Client(), payload).status_code == 200
    # A redelivery that slips past the webhook ledger (a concurrent one) is refused by the row.
    assert referrals.reward_for_invoice(referee.stable_user_id, "in_1", None) == "none"
    owner.refresh_from_db()
    assert owner.referral_standard_credit_expires_at == timezone.now() + referrals.REWARD
    row = Referral.objects.get()
    assert (row.status, row.reward_invoice_id) == ("rewarded", "in_1")
    assert cached_plan(owner.stable_user_id) == Plan.STANDARD
    # A later invoice of the same referee adds nothing: one reward per referral.
    post_webhook(Client(), paid(referee, "in_2"))
    owner.refresh_from_db()
    assert owner.referral_standard_credit_expires_at == timezone.now() + referrals.REWARD


def test_rewards_stack_for_the_referrer(owner, outsider, operator, frozen_clock):
    for referee in (outsider, operator):
        Referral.objects.create(
            referrer_stable_user_id=owner.stable_user_id,
            referee_stable_user_id=referee.stable_user_id,
        )
        assert referrals.reward_for_invoice(referee.stable_user_id, f"in_{referee.pk}", None) == (
            "rewarded"
        )
    owner.refresh_from_db()
    assert owner.referral_standard_credit_expires_at == timezone.now() + 2 * referrals.REWARD


def test_a_reward_is_held_until_the_referee_verifies(
    client, owner, django_capture_on_commit_callbacks, frozen_clock
):
    client.get(f"/?ref={owner.username}")
    referee = sign_up(client, django_capture_on_commit_callbacks, "slowpoke")
    post_webhook(Client(), paid(referee, "in_held"))
    row = Referral.objects.get()
    assert (row.status, row.held_invoice_id) == ("pending", "in_held")
    owner.refresh_from_db()
    assert owner.referral_standard_credit_expires_at is None
    frozen_clock.shift(timedelta(hours=1))
    verify(referee)
    row.refresh_from_db()
    assert (row.status, row.reward_invoice_id, row.held_invoice_id) == ("rewarded", "in_held", None)
    owner.refresh_from_db()
    assert owner.referral_standard_credit_expires_at == timezone.now() + referrals.REWARD


def test_a_free_invoice_rewards_nothing(client, owner, django_capture_on_commit_callbacks):
    client.get(f"/?ref={owner.username}")
    referee = sign_up(client, django_capture_on_commit_callbacks, "freebie")
    verify(referee)
    post_webhook(Client(), paid(referee, "in_zero", amount=0))
    assert Referral.objects.get().status == "pending"


def test_nobody_refers_themselves(owner):
    assert referrals.attribute(owner, owner.username) is None


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_two_concurrent_deliveries_reward_once(owner, outsider):
    # Two webhook workers paying out the same referral at the same moment (two invoices, so
    # the webhook ledger lets both through): the referral row's pending→rewarded update lets
    # one win; the referrer's credit moves once.
    Referral.objects.create(
        referrer_stable_user_id=owner.stable_user_id,
        referee_stable_user_id=outsider.stable_user_id,
    )
    before = timezone.now()
    answers = in_threads(
        *(
            (
                lambda invoice=f"in_race_{n}": referrals.reward_for_invoice(
                    outsider.stable_user_id, invoice, None
                )
            )
            for n in range(2)
        ),
        together=True,
    )
    assert sorted(answers) == ["none", "rewarded"]
    owner.refresh_from_db()
    credit = owner.referral_standard_credit_expires_at
    assert before + referrals.REWARD <= credit <= timezone.now() + referrals.REWARD
    assert Referral.objects.get().status == "rewarded"
