"""Property-based: every operation in /api/v1/schema, called with a valid operator token and
generated input, answers without a 5xx and as its schema documents.

Bounded on purpose (a few examples per operation) so the whole run stays well under a minute;
the explicit regressions live in test_no_500.py and test_mcp_no_500.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token
from config.wsgi import application
from kody.capabilities import all_capabilities, get
from kody.capabilities.cursors import MARK as CURSOR_MARK
from tests.cast import bearer
from tests.kernel.test_api import assert_error

schema = schemathesis.openapi.from_wsgi("/api/v1/schema", application)

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

# Lists take an opaque ``cursor`` (kody.capabilities.cursors): the only accepted values are the
# nextCursor strings the list handed out, which generated input cannot produce. The schema says
# so on the property (and marks it); the acceptance run leaves marked properties out so the rest
# of each list's schema is checked, and test_a_forged_cursor_is_a_coded_4xx covers the cursor.
CURSOR_LISTS = sorted(
    f"{cap.name}Call"
    for cap in all_capabilities()
    if any(
        isinstance(prop, dict) and prop.get(CURSOR_MARK)
        for prop in cap.input_schema.get("properties", {}).values()
    )
)

# Operations whose answer depends on another server: they fetch or call the URL they are given
# (an OpenAPI document, an OAuth provider's endpoints over https, a remote MCP server), so
# whether a schema-valid request succeeds is a fact about that server, which no schema can
# state. Their refusals are coded 4xx, checked by the no-5xx run above and by their own tests.
DEPENDS_ON_ANOTHER_SERVER = [
    "openapiBindingSaveCall",
    "openapiSpecSummarizeCall",
    "adminPlatformOauthAppSaveCall",
    "integrationSaveCall",
    "mcpServerAddCall",
]

# Operations whose acceptance depends on what the account holds, which a schema describes
# only as a shape: emailSend's from address must be one the caller has verified; a scheduled
# job's target must name a capability this caller's token may call, or a published export of
# one of the caller's own packages. Each refusal is a coded 4xx (checked by the no-5xx run and
# by their own tests).
DEPENDS_ON_ACCOUNT_STATE = [
    "emailSendCall",
    "jobScheduleCall",
    "jobScheduleOnceCall",
]

# Operations whose input is code that Kody runs or checks: whether it is accepted is the result
# of running it (execute's module, storageQuery's SQL against the bucket, packageSave's
# manifest, deno check, lint and bundle). Their schemas state the shape (packageSave: the path
# rules); the rest is the run's answer.
DEPENDS_ON_RUNNING_CODE = [
    "executeCall",
    "storageQueryCall",
    "packageSaveCall",
]

# Rules stated in words, not in the schema, on purpose: adminUserCreate's password schema says
# length and not-all-digits, but Django's list of common passwords and its similarity to the
# username or email are not a schema's to carry; secretSetMany's items are untyped so that no
# validation message ever quotes a secret value back; adminPlatformAccountCreate's username
# is checked against the reserved-username set, which operators edit at run time.
RULES_NO_SCHEMA_CARRIES = [
    "adminPlatformAccountCreateCall",
    "adminUserCreateCall",
    "secretSetManyCall",
]

# Text with NUL or a lone surrogate is refused everywhere (kody.capabilities.text); that is one
# rule for every string, so requests that the acceptance check builds leave it out.
acceptance = schemathesis.openapi.from_wsgi("/api/v1/schema", application).exclude(
    operation_id=DEPENDS_ON_ANOTHER_SERVER
    + DEPENDS_ON_ACCOUNT_STATE
    + DEPENDS_ON_RUNNING_CODE
    + RULES_NO_SCHEMA_CARRIES
)
acceptance.config.generation.update(allow_x00=False, codec="utf-8")


@pytest.fixture
def operator_raw(operator: User) -> str:
    return create_token(operator, "schemathesis", enforce_rate_limit=False)[1]


@pytest.fixture(autouse=True)
def inline_actors(settings: Any) -> None:
    settings.KODY_ACTORS_INLINE = True  # admin capabilities read actors without a worker


@pytest.fixture(autouse=True)
def keep_test_connection() -> Iterator[None]:
    # As Django's test client does: the WSGI handler would otherwise close the connection
    # that holds this test's transaction at the end of each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_5xx_or_off_schema(case: Any, operator_raw: str) -> None:
    # Opaque cursors and ids are schema-valid strings that a list did not issue: a coded 400
    # (``invalid_cursor``) is the right answer there, so "valid data is accepted" is not checked.
    case.call_and_validate(
        headers={"Authorization": f"Bearer {operator_raw}"},
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
    )


@acceptance.parametrize()
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_schema_valid_requests_are_accepted(case: Any, operator_raw: str) -> None:
    if case.operation.definition.raw.get("operationId") in CURSOR_LISTS and isinstance(
        case.body, dict
    ):
        case.body.pop("cursor", None)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {operator_raw}"},
        checks=[schemathesis.checks.positive_data_acceptance],
    )


# What each list needs besides its cursor (the rest at its defaults).
CURSOR_LIST_REQUIRED: dict[str, dict[str, Any]] = {
    "accountExportSectionCall": {"section": "d1_table", "table": "users"},
    "communitySearchCall": {"query": "kody"},
    "emailMessageSearchCall": {"query": "hello"},
    "storageExportCall": {"storageId": "exec:forged"},
    "storageListCall": {"storageId": "exec:forged"},
}
FORGED = ["forged", "0", "!!not a cursor!!"]  # none is a cursor any list could read


def test_every_cursor_says_it_is_opaque() -> None:
    assert len(CURSOR_LISTS) >= 15  # the lists issue 39 names, at least
    for operation in CURSOR_LISTS:
        cap = get(operation.removesuffix("Call"))
        assert cap is not None
        prop = cap.input_schema["properties"]["cursor"]
        assert "Opaque" in prop["description"] and "nextCursor" in prop["description"]


@pytest.mark.parametrize("operation", CURSOR_LISTS)
def test_a_forged_cursor_is_a_coded_4xx(operation: str, api: Any, operator_raw: str) -> None:
    name = operation.removesuffix("Call")
    for forged in FORGED:
        body = {**CURSOR_LIST_REQUIRED.get(operation, {}), "cursor": forged}
        response = api.post(
            f"/api/v1/capabilities/{name}", body, format="json", **bearer(operator_raw)
        )
        assert response.status_code in (400, 422), (forged, response.content)
        code = response.json()["error"]["code"]
        assert code in ("invalid_cursor", "invalid_input"), code
        assert_error(response, response.status_code, code)
