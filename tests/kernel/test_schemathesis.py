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

schema = schemathesis.openapi.from_wsgi("/api/v1/schema", application)

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

# Operations that still refuse some schema-valid input for a rule the schema cannot state:
# an opaque cursor the list did not issue, an address that must parse, a job target
# that must name a callable capability (and a cron whose fields are in range), a package file
# path, a secretSetMany item (kept untyped so that no message can quote a value). Shrink this
# list; never grow it.
STILL_STRICTER_THAN_SCHEMA = [
    "emailMessageListCall",
    "emailMessageSearchCall",
    "emailSendCall",
    "jobScheduleCall",
    "jobScheduleOnceCall",
    "packageListCall",
    "packageSaveCall",
    "repoListCall",
    "runListCall",
    "secretSetManyCall",
    "storageExportCall",
    # Capabilities merged after the acceptance check landed, each with a rule its schema
    # does not state yet (issued cursors, limits, ids that must exist); issue 39 keeps the
    # list open until each one's schema says it.
    "adminAuditLogQueryCall",
    "adminCommunityActivityListCall",
    "adminPlatformFeedbackListCall",
    "adminUserCreateCall",
    "adminUserListCall",
    "communitySearchCall",
    "communityStarredListCall",
    "communityTimelineCall",
    "executeCall",
    "repoListSessionsCall",
    "storageListCall",
    "storageQueryCall",
]

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

# Text with NUL or a lone surrogate is refused everywhere (kody.capabilities.text); that is one
# rule for every string, so requests that the acceptance check builds leave it out.
acceptance = schemathesis.openapi.from_wsgi("/api/v1/schema", application).exclude(
    operation_id=STILL_STRICTER_THAN_SCHEMA + DEPENDS_ON_ANOTHER_SERVER
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
    case.call_and_validate(
        headers={"Authorization": f"Bearer {operator_raw}"},
        checks=[schemathesis.checks.positive_data_acceptance],
    )
