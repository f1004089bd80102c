"""Every operator capability the spec names is registered for operators only, and the one
gate turns a person away from each of them with a 403 before any argument is read."""

from __future__ import annotations

import re

import pytest

from apps.accounts.models import AuditEvent, User
from kody.capabilities import Context, all_capabilities, get, invoke
from kody.errors import Forbidden

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

# The admin family as the spec lists it (snake case there, camel case on the wire), plus the
# community moderation switches and the reserved-username list the seeds add.
SPEC_ADMIN = """
admin_account_write_lease_list admin_account_write_lease_repair admin_audit_log_query
admin_community_activity_list admin_feature_flag_list admin_feature_flag_override
admin_feature_flag_set admin_mailbox_maintenance admin_package_codemod_scan
admin_package_codemod_dry_run admin_package_codemod_apply admin_package_codemod_revert
admin_package_scope_grant_create admin_package_scope_grant_list admin_package_scope_grant_revoke
admin_platform_account_create admin_platform_feedback_get admin_platform_feedback_list
admin_platform_feedback_update admin_platform_oauth_app_list admin_platform_oauth_app_save
admin_platform_oauth_app_delete admin_system_email_list admin_system_email_get
admin_system_email_send admin_system_email_sender_rule_list admin_system_email_sender_rule_set
admin_system_email_sender_rule_delete admin_user_create admin_user_get admin_user_list
admin_user_update admin_user_usage admin_user_meter_parity admin_user_meter_storage_reconcile
community_set_trusted community_set_featured admin_reserved_username_list
admin_reserved_username_add admin_reserved_username_remove
""".split()


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.capitalize() for part in rest)


ADMIN_NAMES = sorted(
    {_camel(name) for name in SPEC_ADMIN}
    | {c.name for c in all_capabilities() if c.name.startswith("admin")}
)


def test_every_operator_capability_the_spec_names_is_registered() -> None:
    assert [n for n in map(_camel, SPEC_ADMIN) if get(n) is None] == []


@pytest.mark.parametrize("name", ADMIN_NAMES)
def test_a_person_is_refused_every_operator_capability(name: str, owner: User) -> None:
    cap = get(name)
    assert cap is not None and cap.role == "admin"
    with pytest.raises(Forbidden) as caught:
        invoke(name, Context(user=owner), {})  # empty arguments: the gate comes first
    assert caught.value.status == 403
    row = AuditEvent.objects.get(action=name)
    assert (row.result, row.reason) == ("failure", "forbidden")


def test_no_capability_named_for_operators_is_open_to_people() -> None:
    pattern = re.compile(r"^admin[A-Z]")
    assert [c.name for c in all_capabilities() if pattern.match(c.name) and c.role != "admin"] == []
