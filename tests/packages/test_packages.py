"""Packages and repos over the agent API: save-and-publish, checks that change nothing, the
KV rollback, promotion, and the outsider who finds nothing."""

from __future__ import annotations

import json

import pytest

from apps.packages.models import EntitySource, PublishedBundleArtifact, SavedPackage, UserRepo
from apps.packages.services.git import head, read_refs, read_tree
from kody.kv import keys as kv_keys
from kody.kv import store as kv
from kody.kv.models import KvEntry

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def files(username: str = "ada", name: str = "greeter", body: str | None = None) -> dict:
    return {
        "package.json": json.dumps(
            {
                "name": f"@{username}/{name}",
                "exports": {".": "./mod.ts"},
                "kody": {"description": "Greets people politely.", "tags": ["examples"]},
            }
        ),
        "README.md": "# Greeter\n\nSays hello.\n",
        "mod.ts": body
        or "export function greet(name: string): string {\n  return `hi ${name}`;\n}\n",
    }


def test_owner_saves_a_package_and_it_is_published_with_snapshots_and_a_bundle(as_owner, owner):
    saved = as_owner.call("packageSave", files=files())
    package = saved["package"]
    assert package["name"] == "@ada/greeter"
    assert {c["name"] for c in saved["checks"]} >= {"manifest", "docs", "imports", "typecheck"}
    assert all(c["ok"] for c in saved["checks"])

    source = EntitySource.objects.get(id=package["sourceId"])
    assert source.user_id == owner.stable_user_id and source.entity_kind == "package"
    assert source.published_commit == package["publishedCommit"] == head(source.repo_id)
    assert read_tree(source.repo_id, source.published_commit)["README.md"].startswith(b"# Greeter")
    snapshot = kv.get_json(kv_keys.source_snapshot(source.id, source.published_commit))
    assert "greet" in snapshot["files"]["mod.ts"]
    manifest = kv.get_json(kv_keys.source_manifest_snapshot(source.id, source.published_commit))
    assert manifest["category"] == "examples" and manifest["exports"] == {".": "./mod.ts"}
    bundle = PublishedBundleArtifact.objects.get(source_id=source.id)
    assert "greet" in kv.get(bundle.kv_key).decode()

    got = as_owner.call("packageGet", name="@ada/greeter")["package"]
    assert got["id"] == package["id"] and got["publishedCommit"] == package["publishedCommit"]
    listed = as_owner.call("packageList", query="greet")["packages"]
    assert [p["id"] for p in listed] == [package["id"]]


def test_an_update_publishes_a_descendant_commit(as_owner):
    first = as_owner.call("packageSave", files=files())["package"]
    body = "export function greet(name: string): string {\n  return `hello ${name}`;\n}\n"
    second = as_owner.call("packageSave", files=files(body=body), packageId=first["id"])["package"]
    assert second["publishedCommit"] != first["publishedCommit"]
    source = EntitySource.objects.get(id=first["sourceId"])
    assert head(source.repo_id) == second["publishedCommit"]
    again = as_owner.call("packagePublishExternalPush", packageId=first["id"])
    assert again["status"] == "already_published"


@pytest.mark.parametrize(
    ("broken", "failed"),
    [
        ({"README.md": None}, "docs"),
        ({"package.json": '{"name": "@ben/greeter"}'}, "manifest"),
        ({"mod.ts": 'export const x: number = "text";\n'}, "typecheck"),
        (
            {"mod.ts": 'export async function f() { return await import("kody:@ada/x"); }\n'},
            "imports",
        ),
        ({"mod.ts": 'import { y } from "kody:@ada/missing";\nexport const x = y;\n'}, "imports"),
        (
            {"mod.ts": 'import x from "https://example.com/x.ts";\nexport const y = x;\n'},
            "typecheck",
        ),
    ],
)
def test_a_failing_check_changes_nothing(as_owner, broken, failed):
    body = {k: v for k, v in {**files(), **broken}.items() if v is not None}
    before = (KvEntry.objects.count(), EntitySource.objects.count())
    error = as_owner.error("packageSave", 422, files=body)
    assert error["code"] == "checks_failed"
    assert failed in {c["name"] for c in error["details"]["failed"]}
    assert (KvEntry.objects.count(), EntitySource.objects.count()) == before
    assert not SavedPackage.objects.exists()


def test_a_failing_check_on_update_leaves_refs_and_pointer(as_owner):
    package = as_owner.call("packageSave", files=files())["package"]
    source = EntitySource.objects.get(id=package["sourceId"])
    refs = read_refs(source.repo_id)
    bad = files(body='export const x: number = "text";\n')
    as_owner.error("packageSave", 422, files=bad, packageId=package["id"])
    source.refresh_from_db()
    assert source.published_commit == package["publishedCommit"]
    assert read_refs(source.repo_id) == refs


def test_a_kv_failure_during_publish_rolls_the_pointer_and_ref_back(as_owner, monkeypatch):
    package = as_owner.call("packageSave", files=files())["package"]
    source = EntitySource.objects.get(id=package["sourceId"])
    refs = read_refs(source.repo_id)

    def broken_put(key, value, *, ttl=None):
        raise OSError("kv down")

    monkeypatch.setattr(kv, "put", broken_put)
    body = "export function greet(name: string): string {\n  return `yo ${name}`;\n}\n"
    error = as_owner.error("packageSave", 503, files=files(body=body), packageId=package["id"])
    assert error["code"] == "snapshot_write_failed"
    source.refresh_from_db()
    assert source.published_commit == package["publishedCommit"]
    assert read_refs(source.repo_id) == refs


def test_packages_import_each_other_statically(as_owner):
    as_owner.call("packageSave", files=files(name="util"))
    body = (
        'import { greet } from "kody:@ada/util";\n'
        "export function twice(n: string): string {\n  return greet(n) + greet(n);\n}\n"
    )
    saved = as_owner.call("packageSave", files=files(name="user", body=body))
    source = EntitySource.objects.get(id=saved["package"]["sourceId"])
    manifest = kv.get_json(kv_keys.source_manifest_snapshot(source.id, source.published_commit))
    assert [d["specifier"] for d in manifest["dependencies"]] == ["kody:@ada/util"]


def test_owner_creates_lists_and_deletes_a_repo(as_owner, owner):
    repo = as_owner.call("repoCreate", name="notes", description="scratch")["repo"]
    assert set(repo) == {"id", "name", "sourceId", "defaultBranch"}
    assert repo["defaultBranch"] == "main"
    assert as_owner.call("repoGet", repoId=repo["id"])["repo"]["name"] == "notes"
    as_owner.call("repoCreate", name="other")
    page = as_owner.call("repoList", limit=1)
    assert [r["name"] for r in page["repos"]] == ["notes"] and page["nextCursor"]
    rest = as_owner.call("repoList", limit=1, cursor=page["nextCursor"])
    assert [r["name"] for r in rest["repos"]] == ["other"] and rest["nextCursor"] is None
    as_owner.call("repoDelete", repoId=repo["id"])
    assert not EntitySource.objects.filter(id=repo["sourceId"]).exists()
    assert not UserRepo.objects.filter(id=repo["id"]).exists()


def test_a_git_remote_write_token_opens_the_reconcile_horizon(as_owner, owner):
    repo = as_owner.call("repoCreate", name="notes")["repo"]
    remote = as_owner.call("repoGetGitRemote", repoId=repo["id"], access="write")
    assert remote["remote"].endswith(f"/git/{repo['sourceId']}.git")
    assert remote["gitAuthor"]["email"] == owner.email
    assert any("clone" in line and remote["token"] in line for line in remote["setupCommands"])
    source = EntitySource.objects.get(id=repo["sourceId"])
    assert source.external_check_until is not None


def test_the_repo_limit_is_enforced_at_creation(as_owner, monkeypatch):
    from apps.entitlements.services import enforcement

    monkeypatch.setattr(enforcement, "limit_for", lambda plan, name: 1)
    as_owner.call("repoCreate", name="one")
    error = as_owner.error("repoCreate", 429, name="two")
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "repos"
    assert UserRepo.objects.count() == 1


def test_packages_and_repos_of_another_user_are_not_found(as_owner, as_outsider):
    package = as_owner.call("packageSave", files=files())["package"]
    repo = as_owner.call("repoCreate", name="notes")["repo"]
    pid, rid = package["id"], repo["id"]
    for name, args in [
        ("packageGet", {"packageId": pid}),
        ("packageGet", {"name": "@ada/greeter"}),
        ("packageUpdate", {"packageId": pid, "hidden": True}),
        ("packageDelete", {"packageId": pid}),
        ("packageGetGitRemote", {"packageId": pid}),
        ("packagePublishExternalPush", {"packageId": pid}),
        ("packageSave", {"packageId": pid, "files": files()}),
        ("packageInvocationTokenList", {"packageId": pid}),
        ("packageInvocationTokenGet", {"tokenId": pid}),
        ("repoGet", {"repoId": rid}),
        ("repoDelete", {"repoId": rid}),
        ("repoGetGitRemote", {"repoId": rid}),
        ("repoPromoteToPackage", {"repoId": rid}),
    ]:
        error = as_outsider.error(name, 404, **args)
        assert error["code"].endswith("not_found"), (name, error)
    assert as_outsider.call("packageList")["packages"] == []
    assert as_outsider.call("repoList")["repos"] == []
    assert SavedPackage.objects.get(id=pid).hidden is False
    assert EntitySource.objects.filter(id=repo["sourceId"]).exists()


def test_owner_deletes_a_package_and_nothing_of_it_remains(as_owner):
    package = as_owner.call("packageSave", files=files())["package"]
    source = EntitySource.objects.get(id=package["sourceId"])
    as_owner.call("packageDelete", packageId=package["id"])
    assert not SavedPackage.objects.exists() and not EntitySource.objects.exists()
    assert not PublishedBundleArtifact.objects.exists()
    assert not KvEntry.objects.filter(key__contains=source.id).exists()
    assert read_refs(source.repo_id) == {}
    from kody.blobs import list_prefix

    assert list(list_prefix("source_repos", f"{source.repo_id}/")) == []


def test_a_pushed_repo_is_promoted_to_a_package(as_owner, owner):
    from apps.packages.services.git import Author, commit_files, move_refs

    repo = as_owner.call("repoCreate", name="greeter")["repo"]
    source = EntitySource.objects.get(id=repo["sourceId"])
    error = as_owner.error("repoPromoteToPackage", 422, repoId=repo["id"])
    assert error["details"]["failed"][0]["name"] == "head"
    data = {path: text.encode() for path, text in files().items()}
    sha = commit_files(source.repo_id, data, parent=None, message="m", author=Author("a", "a@b"))
    move_refs(source.repo_id, [("refs/heads/main", None, sha)])

    promoted = as_owner.call("repoPromoteToPackage", repoId=repo["id"])["package"]
    assert promoted["sourceId"] == repo["sourceId"] and promoted["publishedCommit"] == sha
    source.refresh_from_db()
    assert (source.entity_kind, source.entity_id) == ("package", promoted["id"])
    assert as_owner.call("repoList")["repos"] == []
    assert (
        as_owner.call("packageGet", packageId=promoted["id"])["package"]["name"] == "@ada/greeter"
    )


def test_subscriptions_and_invocation_tokens_are_the_owners_only(as_owner, as_outsider, owner):
    from tests.packages.factories import (
        EntitySourceArtifactsPushSubscriptionFactory,
        PackageInvocationTokenFactory,
    )

    package = as_owner.call("packageSave", files=files())["package"]
    EntitySourceArtifactsPushSubscriptionFactory(
        source_id=package["sourceId"], user_id=owner.stable_user_id, repo_id="r-1"
    )
    token = PackageInvocationTokenFactory(user_id=owner.stable_user_id, package_id=package["id"])
    subs = as_owner.call("packageSubscriptionsList")["subscriptions"]
    assert [s["sourceId"] for s in subs] == [package["sourceId"]]
    listed = as_owner.call("packageInvocationTokenList", packageId=package["id"])["tokens"]
    assert [t["id"] for t in listed] == [token.id] and "tokenHash" not in listed[0]
    assert as_owner.call("packageInvocationTokenGet", tokenId=token.id)["token"]["id"] == token.id

    assert as_outsider.call("packageSubscriptionsList")["subscriptions"] == []
    assert as_outsider.call("packageInvocationTokenList")["tokens"] == []
    as_outsider.error("packageInvocationTokenGet", 404, tokenId=token.id)


def test_a_published_package_is_found_by_search_until_hidden(as_owner, as_outsider):
    package = as_owner.call("packageSave", files=files())["package"]
    query = "a package that greets people politely"

    def found(agent) -> list[str]:
        results = agent.call("search", query=query, limit=50)["results"]
        return [r["id"] for r in results if r.get("type") == "package"]

    assert package["id"] in found(as_owner)
    assert package["id"] not in found(as_outsider)
    as_owner.call("packageUpdate", packageId=package["id"], hidden=True)
    assert package["id"] not in found(as_owner)
    assert as_owner.call("packageGet", packageId=package["id"])["package"]["hidden"] is True
    error = as_owner.error("packageUpdate", 403, packageId=package["id"], locked=False)
    assert error["code"] == "forbidden"


# Every package and repo capability, with where its cross-user test is (this module).
ISOLATION_COVERED = {
    "packageSave", "packageGet", "packageList", "packageUpdate", "packageDelete",
    "packageGetGitRemote", "packagePublishExternalPush", "packageSubscriptionsList",
    "packageInvocationTokenGet", "packageInvocationTokenList",
    "repoCreate", "repoGet", "repoList", "repoDelete", "repoGetGitRemote", "repoPromoteToPackage",
}  # fmt: skip


def test_every_package_and_repo_capability_has_an_isolation_test():
    from kody.capabilities import all_capabilities

    modules = {"apps.packages.capabilities.packages", "apps.packages.capabilities.repos"}
    declared = {c.name for c in all_capabilities() if c.handler.__module__ in modules}
    assert declared == ISOLATION_COVERED
