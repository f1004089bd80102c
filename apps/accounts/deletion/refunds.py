"""The pure part of settling Stripe at account deletion: which invoice lines to refund.

Given a subscription's invoices (Stripe invoice objects as dicts, newest first, lines
included) and the current Unix time, ``plan_refund`` walks at most the ten newest *paid*
invoices to the first one that took money and has a positive line whose service period
covers now. The newest paid invoice can be a $0 downgrade proration with nothing to give
back, so it is walked past. Each covering positive line is refunded
``floor(amount × (end − now) / (end − start))`` minor units; lines that floor to zero are
dropped. Negative lines (an upgrade's credit for the old plan) are never refunded here: the
caller caps the credit note at what the invoice actually took (``amount_paid`` minus every
credit note already issued), which nets them.

No network, no clock, no Stripe client: the caller previews and issues the credit note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

INVOICE_WALK_LIMIT = 10


class RefundLine(TypedDict):
    line: str
    amount: int


class RefundPlan(TypedDict):
    invoice: str
    lines: list[RefundLine]
    currency: str


def plan_refund(invoices: Iterable[Mapping[str, Any]], now: int) -> RefundPlan | None:
    """The lines of the newest paid invoice covering ``now`` to refund, or ``None``."""
    paid = [invoice for invoice in invoices if invoice.get("status") == "paid"]
    for invoice in paid[:INVOICE_WALK_LIMIT]:
        if int(invoice.get("amount_paid") or 0) <= 0:
            continue
        covering = [line for line in _lines(invoice) if _covers(line, now)]
        if not covering:
            continue
        lines = [
            RefundLine(line=str(line["id"]), amount=amount)
            for line in covering
            if (amount := unused_amount(line, now)) > 0
        ]
        if not lines:
            return None
        return RefundPlan(invoice=str(invoice["id"]), lines=lines, currency=invoice["currency"])
    return None


def unused_amount(line: Mapping[str, Any], now: int) -> int:
    """``floor(amount × (end − now) / (end − start))`` in the smallest currency unit."""
    start, end = _period(line)
    amount = int(line["amount"])
    if end <= start or amount <= 0:
        return 0
    remaining = min(max(end - now, 0), end - start)
    return (amount * remaining) // (end - start)


def _lines(invoice: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    lines = invoice.get("lines") or {}
    data = lines.get("data") if isinstance(lines, Mapping) else lines
    return list(data or [])


def _period(line: Mapping[str, Any]) -> tuple[int, int]:
    period = line.get("period") or {}
    return int(period.get("start") or 0), int(period.get("end") or 0)


def _covers(line: Mapping[str, Any], now: int) -> bool:
    start, end = _period(line)
    return int(line.get("amount") or 0) > 0 and start <= now < end
