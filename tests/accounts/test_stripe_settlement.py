"""Stripe settlement at account deletion, against a local HTTP fake of Stripe's API.

Every amount below is computed by hand in the comment beside it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import stripe

from apps.accounts.deletion import stripe_settlement
from apps.accounts.deletion.stripe_settlement import (
    MEMO,
    AccountDeletionBillingError,
    settle_customer,
)
from tests.entitlements.stripe_fake import StripeFake

DAY = 86_400
START = 1_800_000_000
END = START + 30 * DAY


@pytest.fixture
def fake() -> Iterator[StripeFake]:
    stripe_fake = StripeFake()
    stripe_fake.base = stripe_fake.start()
    yield stripe_fake
    stripe_fake.stop()


@pytest.fixture
def audits() -> list[tuple[str, str, str]]:
    return []


def settle(fake: StripeFake, customer: str, now: int, audits: list) -> dict:
    client = stripe.StripeClient(
        "sk_test_fake", base_addresses={"api": fake.base}, max_network_retries=0
    )
    result = settle_customer(client, customer, now=now, audit=lambda *entry: audits.append(entry))
    return result.as_dict()


def line(amount: int, start: int = START, end: int = END, **extra: object) -> dict:
    return {"amount": amount, "period": {"start": start, "end": end}, **extra}


def subscribed(fake: StripeFake, status: str = "active") -> tuple[str, dict]:
    customer = fake.add_customer()["id"]
    return customer, fake.add_subscription(customer, "kody_pro_month", status=status)


def ours(fake: StripeFake) -> list[dict]:
    return [n for n in fake.credit_notes if n["metadata"].get("kody_account_deletion") == "1"]


def test_active_subscription_refunds_the_unused_third_then_cancels(fake, audits):
    customer, sub = subscribed(fake)
    invoice = fake.add_invoice(sub, [line(3000)])
    result = settle(fake, customer, START + 20 * DAY, audits)  # 10 of 30 days unused
    # 3000 × 10/30 = 1000
    [note] = ours(fake)
    assert note["total"] == note["refund_amount"] == 1000
    assert note["reason"] == "order_change" and note["memo"] == MEMO
    assert note["metadata"] == {"kody_account_deletion": "1", "kody_subscription_id": sub["id"]}
    assert fake.subscriptions[sub["id"]]["status"] == "canceled"
    assert result["stripeRefunds"] == [
        {
            "subscriptionId": sub["id"],
            "amountMinor": 1000,
            "currency": "usd",
            "invoiceId": invoice["id"],
            "creditNoteId": note["id"],
        }
    ]
    assert audits == [("account_deletion_refund", "success", "usd:1000")]


def test_a_zero_dollar_newest_downgrade_refunds_from_the_plan_invoice(fake, audits):
    customer, sub = subscribed(fake)
    plan_invoice = fake.add_invoice(sub, [line(2000)], created=START)
    fake.add_invoice(sub, [line(0)], amount_paid=0, created=START + DAY)
    result = settle(fake, customer, START + 15 * DAY, audits)
    # 2000 × 15/30 = 1000, from the older invoice that took money
    assert [(r["invoiceId"], r["amountMinor"]) for r in result["stripeRefunds"]] == [
        (plan_invoice["id"], 1000)
    ]


def test_upgrade_netting_caps_the_refund_at_what_the_invoice_took(fake, audits):
    customer, sub = subscribed(fake)
    fake.add_invoice(sub, [line(-700), line(1500)], amount_paid=800)
    result = settle(fake, customer, START + 10 * DAY, audits)
    # new-plan line: 1500 × 20/30 = 1000 > cap 800 → scaled 1000 × 800/1000 = 800, fits
    assert [r["amountMinor"] for r in result["stripeRefunds"]] == [800]
    previews = [p for p in fake.paths("GET") if p == "/v1/credit_notes/preview"]
    assert len(previews) == 2


def test_a_discounted_line_refunds_the_previewed_total_not_the_raw_fraction(fake, audits):
    customer, sub = subscribed(fake)
    fake.add_invoice(sub, [line(3000, credit_ratio=(1, 2))], amount_paid=1500)  # 50 % off
    result = settle(fake, customer, START + 20 * DAY, audits)
    # raw 3000 × 10/30 = 1000; Stripe prorates the discount: credit 1000 × 1/2 = 500
    assert [r["amountMinor"] for r in result["stripeRefunds"]] == [500]


def test_a_preview_that_fits_on_the_third_pass(fake, audits):
    customer, sub = subscribed(fake)
    tax = (6, 5)  # 20 % exclusive tax, Stripe rounds each line's credit up
    fake.add_invoice(
        sub, [line(2, credit_ratio=tax), line(4, credit_ratio=tax), line(-2)], amount_paid=4
    )
    result = settle(fake, customer, START, audits)  # the whole period unused
    # pass 1: lines 2, 4 → ⌈2.4⌉ + ⌈4.8⌉ = 8 > cap 4 → scale ×4/8 → 1, 2
    # pass 2: ⌈1.2⌉ + ⌈2.4⌉ = 5 > 4 → scale ×4/5 → 0 (dropped), 1
    # pass 3: ⌈1.2⌉ = 2 ≤ 4 → credit note of 2 on the second line alone
    previews = [p for p in fake.paths("GET") if p == "/v1/credit_notes/preview"]
    assert len(previews) == 3
    [note] = ours(fake)
    assert note["total"] == 2 and len(note["lines"]) == 1 and note["lines"][0]["amount"] == 1
    assert [r["amountMinor"] for r in result["stripeRefunds"]] == [2]


def test_a_preview_that_never_fits_is_skipped_audited_and_does_not_block(fake, audits):
    customer, sub = subscribed(fake)
    fake.add_invoice(sub, [line(3000, credit_fixed=900)], amount_paid=500)
    result = settle(fake, customer, START + 20 * DAY, audits)
    # 1000 + 900 > 500; every scaled preview still carries the flat 900 > cap 500
    assert result["stripeRefunds"] == [] and ours(fake) == []
    assert result["skippedRefunds"] == [
        {"subscriptionId": sub["id"], "reason": "unfittable:usd:500"}
    ]
    assert audits == [("account_deletion_refund_skipped", "failure", "unfittable:usd:500")]
    assert fake.subscriptions[sub["id"]]["status"] == "canceled"


def test_the_cap_counts_credit_notes_on_every_page(fake, audits):
    customer, sub = subscribed(fake)
    invoice = fake.add_invoice(sub, [line(3000)])
    for _ in range(150):  # someone else's notes, two pages of 100
        fake.add_credit_note(invoice, 10)
    result = settle(fake, customer, START + 10 * DAY, audits)
    # 3000 × 20/30 = 2000 > cap 3000 − 150 × 10 = 1500 → scaled to 1500
    assert [r["amountMinor"] for r in result["stripeRefunds"]] == [1500]


def test_a_credit_note_listing_too_long_to_trust_skips_the_refund(fake, audits, monkeypatch):
    monkeypatch.setattr(stripe_settlement, "MAX_CREDIT_NOTE_PAGES", 2)
    customer, sub = subscribed(fake)
    invoice = fake.add_invoice(sub, [line(3000)], amount_paid=10_000)
    for _ in range(201):  # more than two pages of 100
        fake.add_credit_note(invoice, 1)
    result = settle(fake, customer, START + 10 * DAY, audits)
    reason = f"credit_notes_incomplete:{invoice['id']}"
    assert result["skippedRefunds"] == [{"subscriptionId": sub["id"], "reason": reason}]
    assert audits == [("account_deletion_refund_skipped", "failure", reason)]
    assert ours(fake) == [] and fake.subscriptions[sub["id"]]["status"] == "canceled"


def test_a_retry_after_a_partial_run_reports_the_earlier_refund_without_a_second(fake, audits):
    customer, sub = subscribed(fake)
    invoice = fake.add_invoice(sub, [line(3000)])
    # An earlier attempt issued its credit note, then died before cancelling.
    earlier = fake.add_credit_note(
        invoice,
        1000,
        metadata={"kody_account_deletion": "1", "kody_subscription_id": sub["id"]},
    )
    result = settle(fake, customer, START + 20 * DAY, audits)
    assert ours(fake) == [earlier]
    assert [r["creditNoteId"] for r in result["stripeRefunds"]] == [earlier["id"]]
    assert fake.subscriptions[sub["id"]]["status"] == "canceled"
    again = settle(fake, customer, START + 20 * DAY, audits)
    assert [r["creditNoteId"] for r in again["stripeRefunds"]] == [earlier["id"]]
    assert ours(fake) == [earlier]


def test_a_memo_alone_does_not_count_as_an_earlier_refund(fake, audits):
    customer, sub = subscribed(fake)
    invoice = fake.add_invoice(sub, [line(3000)])
    fake.add_credit_note(invoice, 100, memo=MEMO)  # no metadata marker
    settle(fake, customer, START + 20 * DAY, audits)
    # 3000 × 10/30 = 1000 ≤ cap 3000 − 100 = 2900
    assert [n["total"] for n in ours(fake)] == [1000]


def test_stripe_rejecting_the_credit_note_keeps_the_account_and_the_subscription(fake, audits):
    customer, sub = subscribed(fake)
    fake.add_invoice(sub, [line(3000)])
    fake.reject_credit_notes = "The credit amount exceeds what can be credited"
    with pytest.raises(AccountDeletionBillingError) as caught:
        settle(fake, customer, START + 20 * DAY, audits)
    assert caught.value.status == 502 and caught.value.code == "billing_settlement_failed"
    assert fake.subscriptions[sub["id"]]["status"] == "active"


@pytest.mark.parametrize("status", ["past_due", "unpaid", "paused", "incomplete"])
def test_unpaid_kinds_are_cancelled_without_a_refund(fake, audits, status):
    customer, sub = subscribed(fake, status=status)
    fake.add_invoice(sub, [line(3000)])
    result = settle(fake, customer, START + 20 * DAY, audits)
    assert result["stripeRefunds"] == [] and ours(fake) == []
    assert result["cancelledSubscriptions"] == [sub["id"]]
    assert "/v1/invoices" not in fake.paths("GET")


def test_a_charge_refunded_in_full_gets_no_credit_note(fake, audits):
    customer, sub = subscribed(fake)
    fake.add_invoice(sub, [line(3000)], charge_refunded=True)
    result = settle(fake, customer, START + 20 * DAY, audits)
    assert result["stripeRefunds"] == [] and ours(fake) == []
    assert fake.subscriptions[sub["id"]]["status"] == "canceled"


def test_an_already_cancelled_subscription_is_left_alone(fake, audits):
    customer, sub = subscribed(fake, status="canceled")
    fake.add_invoice(sub, [line(3000)])
    result = settle(fake, customer, START + 20 * DAY, audits)
    assert result == {"stripeRefunds": [], "cancelledSubscriptions": [], "skippedRefunds": []}


def test_two_settlements_racing_past_the_listing_issue_one_credit_note(fake, audits):
    """Without the deletion's run lock (another code path, a bypass): both settlements list the
    invoice's notes before either issues one; the idempotency key makes Stripe answer the
    second create with the first note instead of refunding twice."""
    import threading

    customer, sub = subscribed(fake)
    fake.add_invoice(sub, [line(3000)])
    listed = threading.Barrier(2)

    def both_list_first(method: str, path: str) -> None:
        if method == "GET" and path == "/v1/credit_notes":
            try:
                listed.wait(timeout=2)
            except threading.BrokenBarrierError:
                pass

    fake.before = both_list_first
    results: list[dict] = []
    threads = [
        threading.Thread(target=lambda: results.append(settle(fake, customer, START, audits)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    [note] = ours(fake)
    assert note["total"] == 3000  # the whole period is unused at START
    assert [r["stripeRefunds"][0]["creditNoteId"] for r in results] == [note["id"]] * 2
