"""Publishing under a platform account's scope: only a person an operator granted that scope
may publish there; an outsider is refused with the coded 403 and nothing is stored; once the
grant is revoked the next publish is refused too and the published commit stays put."""

from __future__ import annotations

import json

import pytest

from apps.accounts.models import User
from apps.packages.models import EntitySource, SavedPackage
from tests.accounts import factories as f

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def platform() -> User:
    return f.UserFactory(username="acme-official", account_type="platform")


@pytest.fixture
def as_operator(operator: User, as_owner):  # type: ignore[no-untyped-def]
    return type(as_owner)(operator)  # the same REST agent, holding the operator's token


def tree(name: str, body: str = "export default () => 1;\n") -> dict[str, str]:
    manifest = {
        "name": name,
        "exports": {".": "./mod.ts"},
        "kody": {"description": "An official package.", "tags": ["examples"]},
    }
    return {"package.json": json.dumps(manifest), "README.md": "# tool\n", "mod.ts": body}


def grant(
    as_operator,  # type: ignore[no-untyped-def]
    platform: User,
    person: User,
    verb: str = "Create",
) -> None:
    as_operator.call(
        f"adminPackageScopeGrant{verb}",
        scopeOwnerUserId=platform.stable_user_id,
        granteeUserId=person.stable_user_id,
    )


def test_without_a_grant_nobody_publishes_under_a_platform_scope(as_owner, owner, platform):
    error = as_owner.error("packageSave", 403, files=tree("@acme-official/tool"))
    assert error["code"] == "package_scope_not_granted"
    assert error["details"]["scope"] == "acme-official"
    assert not SavedPackage.objects.filter(user_id=owner.stable_user_id).exists()
    assert not EntitySource.objects.filter(user_id=owner.stable_user_id).exists()


def test_the_grantee_publishes_and_an_outsider_is_refused(
    as_owner, owner, as_outsider, outsider, as_operator, platform
):
    grant(as_operator, platform, owner)
    package = as_owner.call("packageSave", files=tree("@acme-official/tool"))["package"]
    assert package["name"] == "@acme-official/tool" and package["publishedCommit"]

    error = as_outsider.error("packageSave", 403, files=tree("@acme-official/other"))
    assert error["code"] == "package_scope_not_granted"
    assert not SavedPackage.objects.filter(user_id=outsider.stable_user_id).exists()
    # The outsider sees nothing of the grantee's package either.
    as_outsider.error("packageGet", 404, packageId=package["id"])


def test_a_revoked_grant_refuses_the_next_publish(as_owner, owner, as_operator, platform):
    grant(as_operator, platform, owner)
    package = as_owner.call("packageSave", files=tree("@acme-official/tool"))["package"]
    grant(as_operator, platform, owner, verb="Revoke")

    changed = tree("@acme-official/tool", "export default () => 2;\n")
    error = as_owner.error("packageSave", 403, files=changed, packageId=package["id"])
    assert error["code"] == "package_scope_not_granted"
    source = EntitySource.objects.get(id=package["sourceId"])
    assert source.published_commit == package["publishedCommit"]


def test_another_persons_scope_is_still_a_failed_check(as_owner, owner, outsider):
    error = as_owner.error("packageSave", 422, files=tree("@ben/tool"))
    assert "@ada/" in json.dumps(error["details"])
    assert not SavedPackage.objects.filter(user_id=owner.stable_user_id).exists()
