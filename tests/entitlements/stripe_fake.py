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
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.fail_next: int = 0  # answer this many requests with a 500
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
                status, payload = fake.handle(self.command, url.path, params)
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

    def paths(self, method: str | None = None) -> list[str]:
        return [p for m, p, _ in self.requests if method is None or m == method]

    # --- the API -----------------------------------------------------------------------
    def handle(self, method: str, path: str, params: dict[str, str]) -> tuple[int, dict]:
        with self._lock:
            self.requests.append((method, path, params))
            if self.fail_next > 0:
                self.fail_next -= 1
                return 500, {"error": {"type": "api_error", "message": "fake outage"}}
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
