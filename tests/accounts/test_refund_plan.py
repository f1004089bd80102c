"""plan_refund: the pure walk and per-line proration of seed 000's deletion refund."""

from __future__ import annotations

from apps.accounts.deletion.refunds import plan_refund, unused_amount

DAY = 86_400
START = 1_800_000_000  # a period start; the numbers below are computed by hand from it
END = START + 30 * DAY


def line(line_id: str, amount: int, start: int = START, end: int = END) -> dict:
    return {"id": line_id, "amount": amount, "period": {"start": start, "end": end}}


def invoice(invoice_id: str, *lines: dict, paid: int | None = None, status: str = "paid") -> dict:
    total = sum(item["amount"] for item in lines)
    return {
        "id": invoice_id,
        "status": status,
        "currency": "usd",
        "amount_paid": total if paid is None else paid,
        "lines": {"data": list(lines)},
    }


def test_a_third_of_the_period_left_refunds_a_third_floored():
    now = START + 20 * DAY  # 10 of 30 days unused
    plan = plan_refund([invoice("in_1", line("il_1", 1000))], now)
    # 1000 × 10/30 = 333.33… → 333
    assert plan == {
        "invoice": "in_1",
        "lines": [{"line": "il_1", "amount": 333}],
        "currency": "usd",
    }


def test_a_zero_dollar_newest_downgrade_is_walked_past():
    now = START + 15 * DAY
    newest = invoice("in_downgrade", line("il_zero", 0), paid=0)
    older = invoice("in_plan", line("il_plan", 2000))
    plan = plan_refund([newest, older], now)
    assert plan == {
        "invoice": "in_plan",
        "lines": [{"line": "il_plan", "amount": 1000}],
        "currency": "usd",
    }


def test_upgrade_netting_refunds_only_the_positive_new_plan_line():
    now = START + 10 * DAY  # 20 of 30 days unused
    upgrade = invoice(
        "in_up",
        line("il_old_credit", -700),  # unused old plan, credited on the upgrade invoice
        line("il_new", 1500),
        paid=800,
    )
    plan = plan_refund([upgrade], now)
    # 1500 × 20/30 = 1000 exactly; the cap (amount_paid − credit notes) is the caller's job
    assert plan == {
        "invoice": "in_up",
        "lines": [{"line": "il_new", "amount": 1000}],
        "currency": "usd",
    }


def test_every_covering_positive_line_gets_its_own_entry():
    now = START + 29 * DAY + DAY // 2  # half a day left of thirty
    plan = plan_refund([invoice("in_1", line("il_seat", 999), line("il_addon", 61))], now)
    # 999 × 0.5/30 = 16.65 → 16; 61 × 0.5/30 = 1.0166… → 1
    assert plan["lines"] == [{"line": "il_seat", "amount": 16}, {"line": "il_addon", "amount": 1}]


def test_lines_outside_the_current_period_are_not_refunded():
    now = START + 40 * DAY  # the only period ended ten days ago
    assert plan_refund([invoice("in_past", line("il_1", 1000))], now) is None


def test_nothing_when_every_amount_floors_to_zero():
    now = END - 1  # one second left
    assert plan_refund([invoice("in_1", line("il_1", 100))], now) is None


def test_an_unconverted_trial_has_nothing_to_refund():
    trial = invoice("in_trial", line("il_trial", 0), paid=0)
    assert plan_refund([trial], START + DAY) is None


def test_only_paid_invoices_are_walked_and_at_most_ten():
    now = START + 15 * DAY
    open_invoice = invoice("in_open", line("il_open", 5000), status="open")
    zeroes = [invoice(f"in_zero_{n}", line(f"il_{n}", 0), paid=0) for n in range(10)]
    covering = invoice("in_eleventh", line("il_late", 2000))
    assert plan_refund([open_invoice, *zeroes, covering], now) is None
    assert plan_refund([open_invoice, *zeroes[:9], covering], now)["invoice"] == "in_eleventh"


def test_the_first_paid_covering_invoice_stops_the_walk_even_when_it_floors_to_zero():
    now = END - 1
    newest = invoice("in_new", line("il_new", 10))
    older = invoice("in_old", line("il_old", 10**9, end=END + 30 * DAY))
    assert plan_refund([newest, older], now) is None


def test_unused_amount_is_exact_integer_arithmetic_for_large_amounts():
    big = line("il_big", 10**15 + 7)
    now = START + 7 * DAY
    assert unused_amount(big, now) == ((10**15 + 7) * 23 * DAY) // (30 * DAY)
    assert unused_amount(big, START - DAY) == 10**15 + 7  # before the period: all unused
