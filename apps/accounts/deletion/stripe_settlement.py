"""Settle Stripe before an account is deleted (seed 000, "Account deletion").

* active / trialing subscriptions: refund the unused remainder of the current period with one
  credit note, then cancel;
* past_due / unpaid / paused / incomplete: cancel, no refund;
* anything else (canceled, incomplete_expired): nothing to do.

The refund: ``plan_refund`` picks the invoice and its per-line amounts; the credit note is
capped at what the invoice actually took (``amount_paid`` minus every credit note already
issued on it, listed to the end), previewed, scaled down by ``cap / previewed`` and previewed
again up to ``MAX_FIT_PASSES`` times; issued with ``refund_amount`` = the previewed total,
``reason=order_change``, the memo and the two metadata keys. Two cases skip the refund without
blocking the deletion, each audited: a preview that never fits (``unfittable:{currency}:{cap}``)
and a credit-note listing too long to trust (``credit_notes_incomplete:{invoiceId}``). Any
other Stripe rejection raises ``AccountDeletionBillingError``: the deletion stops and keeps the
account, so nobody is billed for an account that is gone nor loses a refund silently.

Every mutation carries an idempotency key derived from what it acts on (``idempotency_key``:
the credit note from the subscription and invoice, the cancel from the subscription), so two
settlements racing past the listing below, or a retry whose first answer was lost, make Stripe
answer the first request again instead of refunding twice. (The deletion job also runs one
settlement at a time; the keys hold even if that lock were bypassed.)

Retries are idempotent: an invoice already carrying an issued credit note with
``metadata.kody_account_deletion=1`` is reported, not refunded again, and already-cancelled or
missing subscriptions count as cancelled. After cancelling, every issued Kody-marked note of
the customer is reported, so a retry still shows refunds an earlier attempt issued.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import stripe

from apps.accounts.deletion.refunds import RefundPlan, plan_refund
from kody.errors import KodyError

log = logging.getLogger(__name__)

REFUND_STATUSES = frozenset({"active", "trialing"})
CANCEL_ONLY_STATUSES = frozenset({"past_due", "unpaid", "paused", "incomplete"})
MEMO = "Prorated refund for unused time after account deletion"
MARKER = "kody_account_deletion"
MAX_FIT_PASSES = 6
CREDIT_NOTE_PAGE_SIZE = 100
# More credit notes than this on one invoice is not a listing we trust to compute a cap from.
MAX_CREDIT_NOTE_PAGES = 20


class AccountDeletionBillingError(KodyError):
    code = "billing_settlement_failed"
    status = 502
    message = "Stripe refused to settle the subscription; the account was kept."


@dataclass(frozen=True)
class StripeRefund:
    subscription_id: str
    amount_minor: int
    currency: str
    invoice_id: str
    credit_note_id: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "subscriptionId": self.subscription_id,
            "amountMinor": self.amount_minor,
            "currency": self.currency,
            "invoiceId": self.invoice_id,
            "creditNoteId": self.credit_note_id,
        }


@dataclass
class Settlement:
    refunds: list[StripeRefund] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stripeRefunds": [refund.as_dict() for refund in self.refunds],
            "cancelledSubscriptions": list(self.cancelled),
            "skippedRefunds": list(self.skipped),
        }


# (action, result, reason) → the audit trail; the caller binds the account's email.
AuditFn = Callable[[str, str, str], None]


def settle_customer(
    client: stripe.StripeClient, customer_id: str, *, now: int, audit: AuditFn
) -> Settlement:
    """Refund and cancel every subscription of ``customer_id``; raise to keep the account."""
    settlement = Settlement()
    try:
        subscriptions = _all(
            client.v1.subscriptions.list, {"customer": customer_id, "status": "all"}
        )
        for subscription in subscriptions:
            status = subscription.get("status")
            if status in REFUND_STATUSES:
                refund = _refund_subscription(client, subscription, now, audit, settlement)
                if refund is not None:
                    settlement.refunds.append(refund)
            if status in REFUND_STATUSES | CANCEL_ONLY_STATUSES:
                _cancel(client, subscription["id"])
                settlement.cancelled.append(subscription["id"])
        _report_earlier_refunds(client, customer_id, settlement)
    except stripe.StripeError as exc:
        log.warning("account deletion: stripe settlement failed: %s", type(exc).__name__)
        raise AccountDeletionBillingError(
            details={"stripe_error": type(exc).__name__, "stripe_code": exc.code or ""}
        ) from exc
    return settlement


def _refund_subscription(
    client: stripe.StripeClient,
    subscription: dict[str, Any],
    now: int,
    audit: AuditFn,
    settlement: Settlement,
) -> StripeRefund | None:
    query = {"subscription": subscription["id"], "status": "paid", "limit": 10}
    invoices = _data(_plain(client.v1.invoices.list(query)))
    plan = plan_refund(invoices, now)
    if plan is None:
        return None
    invoice = next(item for item in invoices if item["id"] == plan["invoice"])
    notes = _credit_notes(client, invoice["id"])
    if notes is None:
        reason = f"credit_notes_incomplete:{invoice['id']}"
        log.warning("account_deletion_refund_credit_notes_incomplete invoice=%s", invoice["id"])
        audit("account_deletion_refund_skipped", "failure", reason)
        settlement.skipped.append({"subscriptionId": subscription["id"], "reason": reason})
        return None
    issued = [note for note in notes if note.get("status") != "void"]
    marked = next((note for note in issued if _is_ours(note)), None)
    if marked is not None:
        return _as_refund(subscription["id"], invoice, marked)
    if _charge_fully_refunded(client, invoice):
        return None
    cap = int(invoice.get("amount_paid") or 0) - sum(int(note["total"]) for note in issued)
    if cap <= 0:
        return None
    fitted = _fit(client, plan, cap)
    if fitted is None:
        reason = f"unfittable:{plan['currency']}:{cap}"
        log.warning("account_deletion_refund_unfittable invoice=%s", invoice["id"])
        audit("account_deletion_refund_skipped", "failure", reason)
        settlement.skipped.append({"subscriptionId": subscription["id"], "reason": reason})
        return None
    lines, total = fitted
    if total <= 0:
        return None
    note = _plain(
        client.v1.credit_notes.create(
            {
                **_note_params(invoice["id"], lines),
                "refund_amount": total,
                "reason": "order_change",
                "memo": MEMO,
                "metadata": {MARKER: "1", "kody_subscription_id": subscription["id"]},
            },
            {"idempotency_key": idempotency_key("credit-note", subscription["id"], invoice["id"])},
        )
    )
    audit("account_deletion_refund", "success", f"{plan['currency']}:{total}")
    return _as_refund(subscription["id"], invoice, note)


def _fit(
    client: stripe.StripeClient, plan: RefundPlan, cap: int
) -> tuple[list[dict[str, Any]], int] | None:
    """Preview, scaling down by cap / total until the preview fits under ``cap``."""
    lines = [dict(line) for line in plan["lines"]]
    for _ in range(MAX_FIT_PASSES):
        preview = _plain(client.v1.credit_notes.preview(_note_params(plan["invoice"], lines)))
        total = int(preview["total"])
        if total <= 0:
            return lines, 0
        if total <= cap:
            return lines, total
        scaled = [{**line, "amount": line["amount"] * cap // total} for line in lines]
        lines = [line for line in scaled if line["amount"] > 0]
        if not lines:
            return [], 0
    return None


def _note_params(invoice_id: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "invoice": invoice_id,
        "lines": [
            {
                "type": "invoice_line_item",
                "invoice_line_item": line["line"],
                "amount": line["amount"],
            }
            for line in lines
        ],
    }


def _credit_notes(client: stripe.StripeClient, invoice_id: str) -> list[dict[str, Any]] | None:
    """Every credit note on the invoice (any issuer), or ``None`` past the page bound."""
    notes: list[dict[str, Any]] = []
    params: dict[str, Any] = {"invoice": invoice_id, "limit": CREDIT_NOTE_PAGE_SIZE}
    for _ in range(MAX_CREDIT_NOTE_PAGES):
        page = _plain(client.v1.credit_notes.list(params))
        data = _data(page)
        notes.extend(data)
        if not page.get("has_more") or not data:
            return notes
        params = {**params, "starting_after": data[-1]["id"]}
    return None


def _charge_fully_refunded(client: stripe.StripeClient, invoice: dict[str, Any]) -> bool:
    charge = invoice.get("charge")
    if not charge:
        return False
    if isinstance(charge, str):
        charge = _plain(client.v1.charges.retrieve(charge))
    return bool(charge.get("refunded"))


def _cancel(client: stripe.StripeClient, subscription_id: str) -> None:
    try:
        client.v1.subscriptions.cancel(
            subscription_id,
            options={"idempotency_key": idempotency_key("cancel", subscription_id)},
        )
    except stripe.InvalidRequestError as exc:
        # Already cancelled or gone: the retry of an earlier attempt.
        if exc.http_status != 404 and exc.code != "resource_missing":
            raise


def _report_earlier_refunds(
    client: stripe.StripeClient, customer_id: str, settlement: Settlement
) -> None:
    known = {refund.credit_note_id for refund in settlement.refunds}
    for note in _all(client.v1.credit_notes.list, {"customer": customer_id}):
        if note["id"] in known or note.get("status") == "void" or not _is_ours(note):
            continue
        subscription = (note.get("metadata") or {}).get("kody_subscription_id", "")
        settlement.refunds.append(
            StripeRefund(
                subscription_id=subscription,
                amount_minor=int(note.get("refund_amount") or note["total"]),
                currency=note.get("currency", ""),
                invoice_id=_id(note.get("invoice")),
                credit_note_id=note["id"],
            )
        )


def _as_refund(subscription_id: str, invoice: dict[str, Any], note: dict[str, Any]) -> StripeRefund:
    return StripeRefund(
        subscription_id=subscription_id,
        amount_minor=int(note.get("refund_amount") or note["total"]),
        currency=invoice["currency"],
        invoice_id=invoice["id"],
        credit_note_id=note["id"],
    )


def idempotency_key(action: str, *ids: str) -> str:
    """The Stripe idempotency key of one settlement mutation: the same objects, the same key
    (Stripe keeps keys 24 hours; the listing above covers a retry after that)."""
    return ":".join(["kody-account-deletion", action, *ids])


def _is_ours(note: dict[str, Any]) -> bool:
    return (note.get("metadata") or {}).get(MARKER) == "1"


def _id(value: Any) -> str:
    return value["id"] if isinstance(value, dict) else str(value or "")


def _plain(obj: Any) -> dict[str, Any]:
    """stripe-python objects are not dicts; everything past the API boundary is."""
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


def _data(page: dict[str, Any]) -> list[dict[str, Any]]:
    return list(page["data"])


def _all(list_call: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> list[Any]:
    items: list[Any] = []
    query = {**params, "limit": 100}
    while True:
        page = _plain(list_call(query))
        data = _data(page)
        items.extend(data)
        if not page.get("has_more") or not data:
            return items
        query = {**query, "starting_after": data[-1]["id"]}
