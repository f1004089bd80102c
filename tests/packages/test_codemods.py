"""Codemods over packages: scan and dry run change nothing, apply publishes through the one
publish path with a per-package result, a package failing its checks is left alone while the
others proceed, an interrupted run resumes on its pending items only, revert restores the prior
content as a new commit, owners reach only their own packages, operators only are admitted to
the admin capabilities (and are audited)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db.models.signals import post_save
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.packages.models import (
    EntitySource,
    PackageCodemodRun,
    PackageCodemodRunItem,
    PackageKodyIdRedirect,
    SavedPackage,
)
from apps.packages.services.codemods import registry, runs
from apps.packages.services.git import head, read_tree
from apps.packages.services.git.objects import BucketObjectStore
from kody.kv import keys as kv_keys
from kody.kv import store as kv
from tests.packages.conftest import Agent

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

CATEGORY = "kody-category-explicit"


def doc_package(username: str, name: str, **kody: Any) -> dict[str, str]:
    """A package with no code (its export is its README): publish checks skip deno."""
    return {
        "package.json": json.dumps(
            {
                "name": f"@{username}/{name}",
                "exports": {".": "./README.md"},
                "kody": {"description": f"The {name} notes.", "tags": ["examples"], **kody},
            },
            indent=2,
        ),
        "README.md": f"# {name}\n",
    }


def save(agent: Agent, files: dict[str, str]) -> dict[str, Any]:
    return agent.call("packageSave", files=files)["package"]


def published(package_id: str) -> tuple[EntitySource, dict[str, bytes]]:
    source = EntitySource.objects.get(id=SavedPackage.objects.get(id=package_id).source_id)
    return source, read_tree(source.repo_id, source.published_commit)


def manifest(package_id: str) -> dict[str, Any]:
    return json.loads(published(package_id)[1]["package.json"])


@pytest.fixture
def as_operator(operator: Any) -> Agent:
    return Agent(operator)


@pytest.fixture
def worker(django_capture_on_commit_callbacks: Any) -> Iterator[Any]:
    """Runs the tasks that capabilities enqueue on commit, in-process."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True

    def call(agent: Agent, name: str, **arguments: Any) -> dict[str, Any]:
        with django_capture_on_commit_callbacks(execute=True):
            return agent.call(name, **arguments)

    yield call
    app.conf.task_always_eager = before


def test_scan_finds_the_packages_a_codemod_applies_to_and_changes_nothing(as_owner):
    bare = save(as_owner, doc_package("ada", "notes"))
    done = save(as_owner, doc_package("ada", "shelved", category="utilities"))
    reply = as_owner.call("packageCodemodScan", codemodId=CATEGORY)
    assert reply["run"]["status"] == "complete" and reply["run"]["mode"] == "scan"
    found = {i["packageId"]: i["status"] for i in reply["items"]}
    assert found == {bare["id"]: "applies", done["id"]: "not_applicable"}
    assert published(bare["id"])[0].published_commit == bare["publishedCommit"]
    listed = as_owner.call("packageCodemodList")
    assert {c["id"] for c in listed["codemods"]} == set(registry.CODEMODS)
    assert [r["id"] for r in listed["runs"]] == [reply["run"]["id"]]


def test_dry_run_shows_the_diff_and_changes_nothing(as_owner):
    bare = save(as_owner, doc_package("ada", "notes"))
    reply = as_owner.call("packageCodemodDryRun", codemodId=CATEGORY)
    (item,) = reply["items"]
    assert item["status"] == "would_change" and item["changedPaths"] == ["package.json"]
    (finding,) = item["findings"]
    assert finding["path"] == "package.json"
    assert '+    "category": "examples"' in finding["diff"]
    source, files = published(bare["id"])
    assert source.published_commit == bare["publishedCommit"] == head(source.repo_id)
    assert "category" not in json.loads(files["package.json"])["kody"]


def test_apply_publishes_a_new_commit_records_the_item_and_is_idempotent(as_owner, worker):
    bare = save(as_owner, doc_package("ada", "notes"))
    started = worker(as_owner, "packageCodemodApply", codemodId=CATEGORY)
    run_id = started["run"]["id"]
    got = as_owner.call("packageCodemodList", runId=run_id)
    assert got["run"]["status"] == "complete"
    (item,) = got["items"]
    assert item["status"] == "applied" and item["beforeCommit"] == bare["publishedCommit"]
    source, files = published(bare["id"])
    assert source.published_commit == item["afterCommit"] == head(source.repo_id)
    assert json.loads(files["package.json"])["kody"]["category"] == "examples"
    commit = BucketObjectStore(source.repo_id)[item["afterCommit"].encode()]
    assert commit.parents == [bare["publishedCommit"].encode()]
    assert run_id.encode() in commit.message
    # Published through publish: the KV snapshot and the manifest snapshot follow the pointer.
    snapshot = kv.get_json(kv_keys.source_snapshot(source.id, item["afterCommit"]))
    assert '"category": "examples"' in snapshot["files"]["package.json"]

    again = worker(as_owner, "packageCodemodApply", codemodId=CATEGORY)
    second = as_owner.call("packageCodemodList", runId=again["run"]["id"])
    assert [i["status"] for i in second["items"]] == ["not_applicable"]
    assert published(bare["id"])[0].published_commit == item["afterCommit"]


def test_a_package_failing_checks_is_recorded_failed_and_unchanged_while_others_proceed(
    as_owner, worker
):
    lib_files = doc_package("ada", "lib")
    lib_files["package.json"] = lib_files["package.json"].replace("./README.md", "./mod.ts")
    lib_files["mod.ts"] = "export const greeting = 'hi';\n"
    lib = save(as_owner, lib_files)
    user_files = doc_package("ada", "user")
    user_files["package.json"] = user_files["package.json"].replace("./README.md", "./mod.ts")
    user_files["mod.ts"] = 'import { greeting } from "kody:@ada/lib";\nexport const g = greeting;\n'
    importer = save(as_owner, user_files)
    fine = save(as_owner, doc_package("ada", "notes"))
    # The import target goes away: the importer's next publish would fail its import check.
    as_owner.call("packageDelete", packageId=lib["id"])

    started = worker(as_owner, "packageCodemodApply", codemodId=CATEGORY)
    items = {
        i["packageId"]: i
        for i in as_owner.call("packageCodemodList", runId=started["run"]["id"])["items"]
    }
    failed = items[importer["id"]]
    assert failed["status"] == "failed" and failed["error"] == "checks"
    assert [c["name"] for c in failed["checks"]["failed"]] == ["imports"]
    assert failed["afterCommit"] is None
    source, files = published(importer["id"])
    assert source.published_commit == importer["publishedCommit"] == head(source.repo_id)
    assert "category" not in json.loads(files["package.json"])["kody"]
    assert items[fine["id"]]["status"] == "applied"
    assert manifest(fine["id"])["kody"]["category"] == "examples"


def test_an_interrupted_run_resumes_on_its_pending_items_only(as_owner, owner):
    first = save(as_owner, doc_package("ada", "alpha"))
    second = save(as_owner, doc_package("ada", "beta"))
    run = runs.start(
        CATEGORY, "apply", initiated_by=owner.stable_user_id, scope_user_id=owner.stable_user_id
    )
    # The worker settles one item, then the operator stops the run.
    calls = iter([False, True])
    run = runs.process(run.id, should_stop=lambda: next(calls))
    assert run.status == "running"
    run = runs.stop(run)
    assert run.status == "stopped"
    assert runs.process(run.id).status == "stopped"  # a stopped run is not worked
    statuses = dict(
        PackageCodemodRunItem.objects.filter(run_id=run.id).values_list("package_id", "status")
    )
    assert sorted(statuses.values()) == ["applied", "pending"]
    done = first if statuses[first["id"]] == "applied" else second
    waiting = second if done is first else first
    assert "category" not in manifest(waiting["id"])["kody"]
    after_done = published(done["id"])[0].published_commit

    run = runs.process(runs.resume(run).id)
    assert run.status == "complete"
    statuses = dict(
        PackageCodemodRunItem.objects.filter(run_id=run.id).values_list("package_id", "status")
    )
    assert statuses == {first["id"]: "applied", second["id"]: "applied"}
    assert manifest(waiting["id"])["kody"]["category"] == "examples"
    # The settled package was not touched again: one codemod commit on top of its save.
    source = published(done["id"])[0]
    assert source.published_commit == after_done
    tip = BucketObjectStore(source.repo_id)[after_done.encode()]
    assert tip.parents == [done["publishedCommit"].encode()]


def test_the_lane_continues_a_run_whose_worker_was_lost(as_owner, owner):
    from kody.lanes import run_lane

    bare = save(as_owner, doc_package("ada", "notes"))
    run = runs.start(
        CATEGORY, "apply", initiated_by=owner.stable_user_id, scope_user_id=owner.stable_user_id
    )
    PackageCodemodRun.objects.filter(id=run.id).update(
        status="running", updated_at=timezone.now() - timedelta(minutes=11)
    )
    assert runs.stalled(limit=10) == [run.id]
    run_lane("codemod_runs")
    assert PackageCodemodRun.objects.get(id=run.id).status == "complete"
    assert manifest(bare["id"])["kody"]["category"] == "examples"


def test_revert_restores_the_prior_content_as_a_new_commit(as_owner, worker):
    bare = save(as_owner, doc_package("ada", "notes"))
    applied = worker(as_owner, "packageCodemodApply", codemodId=CATEGORY)["run"]["id"]
    after = published(bare["id"])[0].published_commit
    reverted = worker(as_owner, "packageCodemodRevert", runId=applied)["run"]
    assert reverted["mode"] == "revert"
    got = as_owner.call("packageCodemodList", runId=reverted["id"])
    assert got["run"]["status"] == "complete" and got["run"]["revertOfRunId"] == applied
    (item,) = got["items"]
    assert item["status"] == "reverted"
    source, files = published(bare["id"])
    assert source.published_commit == item["afterCommit"] not in (after, bare["publishedCommit"])
    original = read_tree(source.repo_id, bare["publishedCommit"])
    assert files == original
    assert BucketObjectStore(source.repo_id)[item["afterCommit"].encode()].parents == [
        after.encode()
    ]
    # A run is reverted once.
    error = as_owner.error("packageCodemodRevert", 409, runId=applied)
    assert error["code"] == "codemod_run_not_revertible"


def test_owner_capabilities_reach_only_the_callers_packages(as_owner, as_outsider, worker):
    mine = save(as_owner, doc_package("ada", "notes"))
    theirs = save(as_outsider, doc_package("ben", "notes"))
    scan = as_outsider.call("packageCodemodScan", codemodId=CATEGORY)
    assert [i["packageId"] for i in scan["items"]] == [theirs["id"]]
    error = as_outsider.error(
        "packageCodemodApply", 404, codemodId=CATEGORY, packageIds=[mine["id"]]
    )
    assert error["code"] == "package_not_found"
    owner_run = worker(as_owner, "packageCodemodApply", codemodId=CATEGORY)["run"]["id"]
    assert as_outsider.error("packageCodemodList", 404, runId=owner_run)["code"] == (
        "codemod_run_not_found"
    )
    assert as_outsider.error("packageCodemodRevert", 404, runId=owner_run)["code"] == (
        "codemod_run_not_found"
    )
    assert owner_run not in [r["id"] for r in as_outsider.call("packageCodemodList")["runs"]]
    # The owner's apply touched the owner's package only.
    assert "category" not in manifest(theirs["id"])["kody"]
    assert manifest(mine["id"])["kody"]["category"] == "examples"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("adminPackageCodemodScan", {"codemodId": CATEGORY}),
        ("adminPackageCodemodDryRun", {"codemodId": CATEGORY}),
        ("adminPackageCodemodApply", {"codemodId": CATEGORY}),
        ("adminPackageCodemodRevert", {"runId": "run-1"}),
    ],
)
def test_admin_codemod_capabilities_are_refused_to_people(as_owner, name, arguments):
    assert as_owner.error(name, 403, **arguments)["code"] == "forbidden"
    assert not PackageCodemodRun.objects.exists()


def test_operator_applies_across_accounts_audit_first_and_reverts(
    as_owner, as_outsider, as_operator, outsider, worker
):
    mine = save(as_owner, doc_package("ada", "notes"))
    theirs = save(as_outsider, doc_package("ben", "notes"))
    scan = as_operator.call("adminPackageCodemodScan", codemodId=CATEGORY)
    assert {i["packageId"] for i in scan["items"]} == {mine["id"], theirs["id"]}
    dry = as_operator.call(
        "adminPackageCodemodDryRun", codemodId=CATEGORY, userId=outsider.stable_user_id
    )
    assert [i["packageId"] for i in dry["items"]] == [theirs["id"]]

    run_id = worker(
        as_operator, "adminPackageCodemodApply", codemodId=CATEGORY, userId=outsider.stable_user_id
    )["run"]["id"]
    assert manifest(theirs["id"])["kody"]["category"] == "examples"
    assert "category" not in manifest(mine["id"])["kody"]
    worker(as_operator, "adminPackageCodemodRevert", runId=run_id)
    assert "category" not in manifest(theirs["id"])["kody"]

    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "result"))
    for name in ("adminPackageCodemodApply", "adminPackageCodemodRevert"):
        mine_rows = [a for a in actions if a[0] in (name, f"{name}:intent")]
        assert [a[0] for a in mine_rows] == [f"{name}:intent", name]
        assert mine_rows[-1][1] == "success"
    assert ("adminPackageCodemodScan", "success") in actions


@pytest.mark.parametrize("name", ["adminPackageCodemodScan", "adminPackageCodemodDryRun"])
def test_operator_scan_and_dry_run_write_their_intent_before_the_run(as_owner, as_operator, name):
    save(as_owner, doc_package("ada", "notes"))
    saved: list[str] = []

    def noted(sender: type, instance: Any, created: bool, **kwargs: Any) -> None:
        if created:
            saved.append(instance.action if sender is AuditEvent else "run")

    post_save.connect(noted, sender=AuditEvent, dispatch_uid="codemod-order")
    post_save.connect(noted, sender=PackageCodemodRun, dispatch_uid="codemod-order-run")
    try:
        as_operator.call(name, codemodId=CATEGORY)
    finally:
        post_save.disconnect(sender=AuditEvent, dispatch_uid="codemod-order")
        post_save.disconnect(sender=PackageCodemodRun, dispatch_uid="codemod-order-run")
    assert saved[: saved.index("run") + 1] == [f"{name}:intent", "run"]
    assert saved[-1] == name


@pytest.mark.parametrize("name", ["adminPackageCodemodScan", "adminPackageCodemodDryRun"])
def test_no_intent_row_no_run(as_owner, as_operator, name, monkeypatch):
    save(as_owner, doc_package("ada", "notes"))

    def audit_down(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("audit database unavailable")

    monkeypatch.setattr(AuditEvent.objects, "create", audit_down)
    assert as_operator.raw(name, codemodId=CATEGORY).status_code == 500
    assert not PackageCodemodRun.objects.exists()


def test_unknown_codemod_is_refused_by_the_schema_and_starts_no_run(as_owner):
    # The schema lists the registered codemods, so an unknown id is invalid input.
    error = as_owner.error("packageCodemodScan", 422, codemodId="nope")
    assert error["code"] == "invalid_input"
    assert error["details"]["errors"][0]["path"] == "/codemodId"
    assert not PackageCodemodRun.objects.exists()


def test_the_registry_refuses_an_id_it_does_not_hold():
    # Callers past the schema (the admin JSON view, the resuming task) still meet the registry.
    with pytest.raises(registry.UnknownCodemod) as caught:
        registry.get("nope")
    assert caught.value.code == "unknown_codemod"


def test_follow_renames_rewrites_old_specifiers_to_the_current_name(owner):
    pkg = SavedPackage.objects.create(
        user_id=owner.stable_user_id, name="@ada/weather", kody_id="@ada/weather", source_id="s"
    )
    PackageKodyIdRedirect.objects.create(
        user_id=owner.stable_user_id, old_kody_id="@ada/forecast", package_id=pkg.id
    )
    bound = registry.get("kody-import-follow-renames").for_owner(owner.stable_user_id)
    files = {
        "mod.ts": b'import { today } from "kody:@ada/forecast/daily";\n'
        b"import { x } from 'kody:@ada/other';\n",
        "README.md": b'"kody:@ada/forecast" in prose stays\n',
    }
    assert bound.applies(files)
    out = bound.rewrite(files)
    assert out["mod.ts"] == (
        b'import { today } from "kody:@ada/weather/daily";\n'
        b"import { x } from 'kody:@ada/other';\n"
    )
    assert out["README.md"] == files["README.md"]
    # Another owner's redirects are not theirs to follow.
    assert not registry.get("kody-import-follow-renames").for_owner("someone-else").applies(files)


RUN_JSON = "/admin/packages/packagecodemodrun/run.json"
STOP_JSON = "/admin/packages/packagecodemodrun/run/stop.json"


def test_admin_console_starts_reads_and_stops_runs_for_operators_only(
    as_owner, operator_client, owner_client
):
    bare = save(as_owner, doc_package("ada", "notes"))
    body = {"mode": "dry_run", "codemodId": CATEGORY, "packageIds": [bare["id"]]}
    # A person is sent to the admin login; nothing starts.
    refused = owner_client.post(RUN_JSON, body, content_type="application/json")
    assert refused.status_code == 302 and not PackageCodemodRun.objects.exists()

    started = operator_client.post(RUN_JSON, body, content_type="application/json")
    assert started.status_code == 200, started.content
    run_id = started.json()["run"]["id"]
    assert ("adminPackageCodemodDryRun", "success") in AuditEvent.objects.values_list(
        "action", "result"
    )
    got = operator_client.get(RUN_JSON, {"id": run_id}).json()
    assert [i["status"] for i in got["items"]] == ["would_change"]
    bad = operator_client.post(RUN_JSON, {"mode": "explode"}, content_type="application/json")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"

    pending = runs.start(CATEGORY, "apply", initiated_by="op", scope_user_id=None)
    stopped = operator_client.post(STOP_JSON, {"id": pending.id}, content_type="application/json")
    assert stopped.status_code == 200 and stopped.json()["run"]["status"] == "stopped"
    assert "codemodRunStop:intent" in AuditEvent.objects.values_list("action", flat=True)
    assert owner_client.post(STOP_JSON, {"id": pending.id}).status_code == 302
    missing = operator_client.post(STOP_JSON, {"id": "nope"}, content_type="application/json")
    assert missing.status_code == 404


def test_locked_packages_and_unpublished_branch_work_are_left_alone(as_owner, worker):
    from apps.packages.services.git import commit_files, move_refs
    from apps.packages.services.git.refs import HEAD_REF
    from apps.packages.services.packages import _author

    locked = save(as_owner, doc_package("ada", "locked"))
    as_owner.call("packageUpdate", packageId=locked["id"], locked=True)
    ahead = save(as_owner, doc_package("ada", "ahead"))
    source, files = published(ahead["id"])
    # A commit pushed to the branch but not published yet.
    draft = commit_files(
        source.repo_id,
        {**files, "README.md": b"# ahead\n\nDraft.\n"},
        parent=source.published_commit,
        message="draft",
        author=_author(as_owner.user),
    )
    move_refs(source.repo_id, [(HEAD_REF, source.published_commit, draft)])

    run_id = worker(as_owner, "packageCodemodApply", codemodId=CATEGORY)["run"]["id"]
    items = {i["packageId"]: i for i in as_owner.call("packageCodemodList", runId=run_id)["items"]}
    assert (items[locked["id"]]["status"], items[locked["id"]]["error"]) == ("failed", "locked")
    assert published(locked["id"])[0].published_commit == locked["publishedCommit"]
    assert (items[ahead["id"]]["status"], items[ahead["id"]]["error"]) == (
        "skipped",
        "unpublished_changes",
    )
    assert head(source.repo_id) == draft
    assert published(ahead["id"])[0].published_commit == ahead["publishedCommit"]
