"""A NUL byte anywhere a request carries text is the API's coded 422 on every surface, not a 500.

Postgres cannot store U+0000; these requests used to reach a query and answer 500. One
middleware (``kody/input_guard.py``) runs the capabilities' own check on the path, the query,
the headers and page forms.
"""

from __future__ import annotations

import pytest
from django.test import Client

from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SECRET = "inbound-secret-for-tests"
MAIL = b"From: a@example.org\r\nTo: x@mail.test\r\nSubject: hi\r\n\r\nhello\r\n"


@pytest.fixture
def inbound(settings) -> Client:
    settings.KODY_INBOUND_EMAIL_SECRET = SECRET
    settings.KODY_MAIL_DOMAIN = "mail.test"
    return Client(HTTP_X_KODY_INBOUND_SECRET=SECRET)


def signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def refused_as_json(response) -> None:
    assert response.status_code == 422, response.content[:300]
    assert response.json()["error"]["code"] == "invalid_input"


def refused_as_page(response) -> None:
    assert response.status_code == 422, response.content[:300]
    page = response.content.decode()
    assert "Request refused" in page and "invalid_input" in page


@pytest.mark.parametrize(
    "query",
    [
        "to=a%00@mail.test&deliveryId=d-1",
        "to=owner@mail.test&deliveryId=a%00b",
        "to=owner@mail.test&from=x%00@example.org",
    ],
)
def test_the_inbound_door_refuses_nul_in_its_query(inbound, query):
    response = inbound.post(f"/inbound/email?{query}", MAIL, content_type="message/rfc822")
    refused_as_json(response)


def test_the_inbound_door_refuses_nul_in_its_headers(inbound):
    response = inbound.post(
        "/inbound/email?to=owner@mail.test",
        MAIL,
        content_type="message/rfc822",
        HTTP_X_KODY_DELIVERY_ID="a\x00b",
    )
    refused_as_json(response)


def test_account_pages_refuse_nul_in_the_query_and_the_path(owner):
    client = signed_in(owner)
    refused_as_page(client.get("/account/email?q=%00"))
    refused_as_page(client.get("/account/jobs/%00"))
    refused_as_page(client.get("/account/email/messages/m%00"))
    refused_as_page(client.get("/account/activity/%00x"))
    # The same pages still answer ordinary requests.
    assert client.get("/account/email?q=hello").status_code == 200
    assert client.get("/account/jobs/no-such-job").status_code == 404


def test_a_form_field_with_nul_is_refused_before_the_view(owner):
    client = signed_in(owner)
    refused_as_page(client.post("/account/secrets/delete", {"name": "api\x00key"}))
    refused_as_page(client.post("/account/secrets/grants", {"name": "k", "packages": ["p\x00"]}))


def test_a_cookie_with_nul_is_refused_before_the_session_is_read():
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "abcdefgh\x00"
    refused_as_page(client.get("/account"))


def test_the_api_answers_nul_in_its_path_with_the_same_code(owner):
    from apps.accounts.services.tokens import create_token

    key = create_token(owner, "laptop", enforce_rate_limit=False)[1]
    response = Client().post("/api/v1/capabilities/x%00", {}, **bearer(key))
    refused_as_json(response)
