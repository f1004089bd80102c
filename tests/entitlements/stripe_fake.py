"""A small in-process fake of the parts of Stripe's HTTP API that Kody calls.

stripe-python is pointed at it through ``settings.STRIPE_API_BASE``, so the real library does
the form encoding, the HTTP round trip and the response parsing. Only the endpoints Kody uses
exist; anything else answers 404 like Stripe does for an unknown path.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


def _form(body: str) -> dict[str, str]:
    return dict(parse_qsl(body, keep_blank_values=True))


def _list(items: list[dict[str, Any]], url: str) -> dict[str, Any]:
    return {"object": "list", "data": items, "has_more": False, "url": url}


class StripeFake:
    def __init__(self) -> None:
        self.customers: dict[str, dict[str, Any]] = {}
        self.prices: dict[str, dict[str, Any]] = {}
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.checkout_sessions: dict[str, dict[str, Any]] = {}
        self.invoices: dict[str, dict[str, Any]] = {}
        self.charges: dict[str, dict[str, Any]] = {}
        self.credit_notes: list[dict[str, Any]] = []
        self.reject_credit_notes: str = ""  # a Stripe error message to answer with, if set
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.fail_next: int = 0  # answer this many requests with a 500
        # (method, path, Idempotency-Key) -> (params, status, payload): Stripe's replay table.
        self.idempotent: dict[tuple[str, str, str], tuple[dict, int, dict]] = {}
        # Called with (method, path) before a request is answered, outside the fake's lock:
        # a test can hold one request back to line two callers up.
        self.before: Any = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        for plan in ("standard", "pro"):
            for interval in ("month", "year"):
                self.add_price(f"kody_{plan}_{interval}", metadata={"kody_plan": plan})

    # --- lifecycle ---------------------------------------------------------------------
    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _respond(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                url = urlsplit(self.path)
                params = _form(body) if body else _form(url.query)
                if fake.before is not None:
                    fake.before(self.command, url.path)
                key = self.headers.get("Idempotency-Key") or ""
                status, payload = fake.handle(self.command, url.path, params, key)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("Request-Id", f"req_{next(fake._ids)}")
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _respond

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # --- fixtures ----------------------------------------------------------------------
    def new_id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids)}"

    def add_price(self, lookup_key: str, metadata: dict[str, str] | None = None) -> dict:
        price = {
            "id": self.new_id("price"),
            "object": "price",
            "lookup_key": lookup_key,
            "metadata": metadata or {},
            "active": True,
            "currency": "usd",
        }
        self.prices[price["id"]] = price
        return price

    def price_by_key(self, lookup_key: str) -> dict[str, Any]:
        return next(p for p in self.prices.values() if p["lookup_key"] == lookup_key)

    def add_subscription(self, customer: str, lookup_key: str, status: str = "active") -> dict:
        sub = {
            "id": self.new_id("sub"),
            "object": "subscription",
            "customer": customer,
            "status": status,
            "created": int(time.time()),
            "items": _list(
                [
                    {
                        "id": self.new_id("si"),
                        "object": "subscription_item",
                        "price": self.price_by_key(lookup_key),
                        "quantity": 1,
                    }
                ],
                "/v1/subscription_items",
            ),
        }
        self.subscriptions[sub["id"]] = sub
        return sub

    def add_customer(self, email: str = "", metadata: dict[str, str] | None = None) -> dict:
        customer = {
            "id": self.new_id("cus"),
            "object": "customer",
            "email": email,
            "metadata": metadata or {},
            "deleted": False,
        }
        self.customers[customer["id"]] = customer
        return customer

    def add_invoice(
        self,
        subscription: dict[str, Any],
        lines: list[dict[str, Any]],
        *,
        amount_paid: int | None = None,
        created: int = 0,
        charge_refunded: bool | None = None,
        status: str = "paid",
    ) -> dict[str, Any]:
        """An invoice of ``subscription``; each line may carry ``credit_ratio`` (num, den):
        how Stripe prorates that line's discounts and exclusive tax into a credit note, and
        ``credit_fixed``: a flat amount any credit on that line carries on top."""
        charge = None
        if charge_refunded is not None:
            charge = self.new_id("ch")
            self.charges[charge] = {"id": charge, "object": "charge", "refunded": charge_refunded}
        invoice = {
            "id": self.new_id("in"),
            "object": "invoice",
            "customer": subscription["customer"],
            "subscription": subscription["id"],
            "status": status,
            "currency": "usd",
            "created": created or int(time.time()) + len(self.invoices),
            "amount_paid": sum(item["amount"] for item in lines)
            if amount_paid is None
            else amount_paid,
            "charge": charge,
            "lines": _list(
                [{"object": "line_item", "id": self.new_id("il"), **item} for item in lines],
                "/v1/invoices/lines",
            ),
        }
        self.invoices[invoice["id"]] = invoice
        return invoice

    def add_credit_note(self, invoice: dict[str, Any], total: int, **extra: Any) -> dict:
        note = {
            "id": self.new_id("cn"),
            "object": "credit_note",
            "invoice": invoice["id"],
            "customer": invoice["customer"],
            "currency": invoice["currency"],
            "status": "issued",
            "total": total,
            "refund_amount": total,
            "metadata": {},
            **extra,
        }
        self.credit_notes.append(note)
        return note

    def paths(self, method: str | None = None) -> list[str]:
        return [p for m, p, _ in self.requests if method is None or m == method]

    # --- the API -----------------------------------------------------------------------
    def handle(
        self, method: str, path: str, params: dict[str, str], idempotency_key: str = ""
    ) -> tuple[int, dict]:
        with self._lock:
            self.requests.append((method, path, params))
            if self.fail_next > 0:
                self.fail_next -= 1
                return 500, {"error": {"type": "api_error", "message": "fake outage"}}
            # Stripe: a mutation repeated with its key is answered as the first time; the same
            # key with other parameters is refused. A request refused before it ran (a 4xx) saves
            # no result, so its retry runs afresh.
            seen = self.idempotent.get((method, path, idempotency_key)) if idempotency_key else None
            if seen is not None:
                if seen[0] != params:
                    return 400, {
                        "error": {
                            "type": "idempotency_error",
                            "message": "Keys for idempotent requests can only be used with "
                            "the same parameters they were first used with.",
                        }
                    }
                return seen[1], seen[2]
            answer = self._route(method, path, params)
            if idempotency_key and method in ("POST", "DELETE") and not 400 <= answer[0] < 500:
                self.idempotent[(method, path, idempotency_key)] = (params, *answer)
            return answer

    def _route(self, method: str, path: str, params: dict[str, str]) -> tuple[int, dict]:
        for pattern, verb, handler in self._routes():
            match = re.fullmatch(pattern, path)
            if match and verb == method:
                return handler(params, *match.groups())
        return 404, {"error": {"type": "invalid_request_error", "message": f"no {path}"}}

    def _routes(self) -> list[tuple[str, str, Any]]:
        return [
            (r"/v1/customers", "POST", self._create_customer),
            (r"/v1/customers/([\w]+)", "GET", self._get_customer),
            (r"/v1/customers/([\w]+)", "DELETE", self._delete_customer),
            (r"/v1/prices", "GET", self._list_prices),
            (r"/v1/checkout/sessions", "POST", self._create_checkout),
            (r"/v1/billing_portal/sessions", "POST", self._create_portal),
            (r"/v1/subscriptions", "GET", self._list_subscriptions),
            (r"/v1/subscriptions/([\w]+)", "DELETE", self._cancel_subscription),
            (r"/v1/invoices", "GET", self._list_invoices),
            (r"/v1/charges/([\w]+)", "GET", self._get_charge),
            (r"/v1/credit_notes", "GET", self._list_credit_notes),
            (r"/v1/credit_notes/preview", "GET", self._preview_credit_note),
            (r"/v1/credit_notes", "POST", self._create_credit_note),
        ]

    def _missing(self, what: str) -> tuple[int, dict]:
        return 404, {"error": {"type": "invalid_request_error", "message": f"No such {what}"}}

    def _create_customer(self, params: dict[str, str]) -> tuple[int, dict]:
        metadata = {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")}
        return 200, self.add_customer(params.get("email", ""), metadata)

    def _get_customer(self, params: dict[str, str], cid: str) -> tuple[int, dict]:
        return (200, self.customers[cid]) if cid in self.customers else self._missing("customer")

    def _delete_customer(self, params: dict[str, str], cid: str) -> tuple[int, dict]:
        if cid not in self.customers:
            return self._missing("customer")
        self.customers[cid]["deleted"] = True
        return 200, {"id": cid, "object": "customer", "deleted": True}

    def _list_prices(self, params: dict[str, str]) -> tuple[int, dict]:
        keys = {v for k, v in params.items() if k.startswith("lookup_keys[")}
        found = [p for p in self.prices.values() if not keys or p["lookup_key"] in keys]
        return 200, _list(found, "/v1/prices")

    def _create_checkout(self, params: dict[str, str]) -> tuple[int, dict]:
        price_id = params.get("line_items[0][price]", "")
        if price_id not in self.prices:
            return self._missing("price")
        if params.get("customer") not in self.customers:
            return self._missing("customer")
        sid = self.new_id("cs")
        session = {
            "id": sid,
            "object": "checkout.session",
            "url": f"https://checkout.stripe.test/c/{sid}",
            "customer": params["customer"],
            "client_reference_id": params.get("client_reference_id"),
            "mode": params.get("mode"),
            "success_url": params.get("success_url"),
            "cancel_url": params.get("cancel_url"),
            "price": price_id,
        }
        self.checkout_sessions[sid] = session
        return 200, session

    def _create_portal(self, params: dict[str, str]) -> tuple[int, dict]:
        if params.get("customer") not in self.customers:
            return self._missing("customer")
        sid = self.new_id("bps")
        return 200, {
            "id": sid,
            "object": "billing_portal.session",
            "customer": params["customer"],
            "return_url": params.get("return_url"),
            "url": f"https://billing.stripe.test/p/{sid}",
        }

    def _list_subscriptions(self, params: dict[str, str]) -> tuple[int, dict]:
        customer = params.get("customer")
        status = params.get("status", "active")
        found = [
            s
            for s in self.subscriptions.values()
            if s["customer"] == customer
            and (status == "all" or s["status"] == status)
            and (status == "all" or s["status"] != "canceled")
        ]
        return 200, _list(found, "/v1/subscriptions")

    def _cancel_subscription(self, params: dict[str, str], sid: str) -> tuple[int, dict]:
        sub = self.subscriptions.get(sid)
        if sub is None:
            return 404, {
                "error": {
                    "type": "invalid_request_error",
                    "code": "resource_missing",
                    "message": "No such subscription",
                }
            }
        sub["status"] = "canceled"
        return 200, sub

    def _list_invoices(self, params: dict[str, str]) -> tuple[int, dict]:
        found = sorted(
            (
                i
                for i in self.invoices.values()
                if i["subscription"] == params.get("subscription")
                and (not params.get("status") or i["status"] == params["status"])
            ),
            key=lambda i: -i["created"],
        )
        return 200, _list(found[: int(params.get("limit", 10))], "/v1/invoices")

    def _get_charge(self, params: dict[str, str], cid: str) -> tuple[int, dict]:
        return (200, self.charges[cid]) if cid in self.charges else self._missing("charge")

    def _list_credit_notes(self, params: dict[str, str]) -> tuple[int, dict]:
        found = [
            n
            for n in self.credit_notes
            if (not params.get("invoice") or n["invoice"] == params["invoice"])
            and (not params.get("customer") or n["customer"] == params["customer"])
        ]
        after = params.get("starting_after")
        if after:
            found = found[[n["id"] for n in found].index(after) + 1 :]
        limit = int(params.get("limit", 10))
        page = _list(found[:limit], "/v1/credit_notes")
        page["has_more"] = len(found) > limit
        return 200, page

    def _requested_lines(self, params: dict[str, str]) -> list[tuple[dict[str, Any], int]] | None:
        invoice = self.invoices.get(params.get("invoice", ""))
        if invoice is None:
            return None
        by_id = {line["id"]: line for line in invoice["lines"]["data"]}
        picked = []
        n = 0
        while f"lines[{n}][invoice_line_item]" in params:
            line = by_id.get(params[f"lines[{n}][invoice_line_item]"])
            if line is None:
                return None
            picked.append((line, int(params[f"lines[{n}][amount]"])))
            n += 1
        return picked

    def _credit_total(self, picked: list[tuple[dict[str, Any], int]]) -> int:
        total = 0
        for line, amount in picked:
            num, den = line.get("credit_ratio", (1, 1))
            total += -(-amount * num // den)  # Stripe's proration of discounts/tax, rounded up
            if amount > 0:
                total += line.get("credit_fixed", 0)  # a flat, non-prorated part (e.g. a fee tax)
        return total

    def _preview_credit_note(self, params: dict[str, str]) -> tuple[int, dict]:
        picked = self._requested_lines(params)
        if picked is None:
            return self._missing("invoice or line")
        total = self._credit_total(picked)
        return 200, {"object": "credit_note", "id": "cnpreview", "total": total}

    def _create_credit_note(self, params: dict[str, str]) -> tuple[int, dict]:
        if self.reject_credit_notes:
            return 400, {
                "error": {"type": "invalid_request_error", "message": self.reject_credit_notes}
            }
        picked = self._requested_lines(params)
        if picked is None:
            return self._missing("invoice or line")
        invoice = self.invoices[params["invoice"]]
        total = self._credit_total(picked)
        issued = sum(
            n["total"]
            for n in self.credit_notes
            if n["invoice"] == invoice["id"] and n["status"] != "void"
        )
        if total > invoice["amount_paid"] - issued:
            return 400, {
                "error": {
                    "type": "invalid_request_error",
                    "message": "The sum of credit amount exceeds the creditable amount",
                }
            }
        if int(params.get("refund_amount", -1)) != total:
            return 400, {
                "error": {"type": "invalid_request_error", "message": "refund_amount mismatch"}
            }
        metadata = {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")}
        note = self.add_credit_note(
            invoice,
            total,
            refund_amount=total,
            reason=params.get("reason"),
            memo=params.get("memo"),
            metadata=metadata,
            lines=[{"invoice_line_item": line["id"], "amount": a} for line, a in picked],
        )
        return 200, note
