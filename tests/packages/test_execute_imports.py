"""Static ``kody:@`` imports in ad hoc ``execute`` code resolve in the caller's account to the
export's bundle at the current published commit; another account's package (a platform
package too) is not importable and the refusal says nothing about whether it exists; a
dynamic ``import("kody:@…")`` is refused with the teaching message."""

from __future__ import annotations

import json

import pytest

from apps.accounts.models.users import AccountType
from tests.packages.conftest import Agent

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SHOUT = "export default (s: string) => s.toUpperCase() + '!';\n"
SECRET_WORD = "owl-7f3a-private-constant"
WORDS = f"export const word = '{SECRET_WORD}';\nexport default () => word;\n"


def publish(
    agent: Agent, name: str, modules: dict[str, str], exports: dict[str, str], **more: str
) -> dict:
    files = {
        "package.json": json.dumps(
            {
                "name": f"@{agent.user.username.lower()}/{name}",
                "exports": exports,
                "kody": {"description": f"The {name} package.", "tags": ["examples"]},
            }
        ),
        "README.md": f"# {name}\n",
        **modules,
    }
    return agent.call("packageSave", files=files, **more)["package"]


@pytest.fixture
def util(as_owner):
    return publish(
        as_owner,
        "util",
        {"words.ts": WORDS, "shout.ts": SHOUT},
        {".": "./words.ts", "./shout": "./shout.ts"},
    )


def test_the_owners_execute_imports_their_published_exports(as_owner, util):
    code = (
        'import shout from "kody:@ada/util/shout";\n'
        'import { word } from "kody:@ada/util";\n'
        "export default async (p: { s: string }) => [shout(p.s), word];\n"
    )
    reply = as_owner.call("execute", code=code, params={"s": "hi"})
    assert reply["result"] == ["HI!", SECRET_WORD]


def test_the_import_follows_the_current_published_commit(as_owner, util):
    code = 'import { word } from "kody:@ada/util";\nexport default async () => word;\n'
    assert as_owner.call("execute", code=code)["result"] == SECRET_WORD
    publish(
        as_owner,
        "util",
        {"words.ts": "export const word = 'second';\nexport default () => word;\n"},
        {".": "./words.ts"},
        packageId=util["id"],
    )
    assert as_owner.call("execute", code=code)["result"] == "second"


def test_an_outsiders_execute_cannot_import_the_owners_package(as_outsider, util):
    code = 'import { word } from "kody:@ada/util";\nexport default async () => word;\n'
    error = as_outsider.error("execute", 422, code=code)
    assert error["code"] == "execute_error"
    assert error["details"]["name"] == "ImportError"
    assert "fork it into your account" in error["message"]
    assert SECRET_WORD not in json.dumps(error)
    # The same answer as for a package nobody has: nothing says the owner's exists.
    missing = 'import { word } from "kody:@ada/nothing";\nexport default async () => word;\n'
    other = as_outsider.error("execute", 422, code=missing)
    assert other["message"].replace("nothing", "util") == error["message"]


def test_a_person_must_fork_a_platform_package_before_importing_it(as_outsider, owner, util):
    owner.account_type = AccountType.PLATFORM
    owner.save(update_fields=["account_type"])
    code = 'import { word } from "kody:@ada/util";\nexport default async () => word;\n'
    error = as_outsider.error("execute", 422, code=code)
    assert error["details"]["name"] == "ImportError" and "fork" in error["message"]
    assert SECRET_WORD not in json.dumps(error)


def test_an_unknown_export_or_bad_specifier_is_refused(as_owner, util):
    unknown = 'import x from "kody:@ada/util/nope";\nexport default async () => x;\n'
    assert as_owner.error("execute", 422, code=unknown)["details"]["name"] == "ImportError"
    bad = 'import x from "kody:@Ada/../util";\nexport default async () => x;\n'
    assert as_owner.error("execute", 422, code=bad)["details"]["name"] == "ImportError"


def test_a_dynamic_kody_import_is_refused_with_the_teaching_message(as_owner, util):
    error = as_owner.error("execute", 422, code="async () => import('kody:@ada/util')")
    assert error["code"] == "execute_error" and "statically" in error["message"]
    assert "import(specifier)" in error["message"]
