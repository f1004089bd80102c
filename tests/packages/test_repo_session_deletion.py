"""Account deletion and export of repo sessions: deletion lists every session from the owner's
index and purges each workspace's spill prefix, failing closed when the index cannot be read;
export carries the catalog and names the workspaces it leaves out."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.export import service as export
from apps.accounts.models import AccountDeletion, DeletionStatus, User
from apps.packages.actor.index import BUCKET, RepoSessionIndex
from apps.packages.models import RepoSessionDueOwner, UserStorageBucket
from kody import blobs
from kody.actors import deletion_safe
from kody.actors.errors import ActorUnavailable
from tests.packages.conftest import Agent
from tests.packages.factories import package_files

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _short_drain(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


def spilled(session_id: str) -> list[str]:
    return list(blobs.list_prefix(BUCKET, blobs.repo_session_prefix(session_id)))


def editing(user: User) -> list[str]:
    """Two sessions on a fresh package, each with a spilled file; their ids."""
    agent = Agent(user)
    package = agent.call("packageSave", files=package_files(user.username))["package"]
    ids = []
    for n in range(2):
        sid = agent.call("repoOpenSession", packageId=package["id"])["session"]["id"]
        agent.call("repoWriteFile", sessionId=sid, path=f"big{n}.txt", content="ab" * 1024 * 1024)
        ids.append(sid)
    return ids


def purge(email: str) -> str:
    out = io.StringIO()
    call_command("purge_account", email, "--yes", stdout=out)
    return out.getvalue()


def test_deletion_with_the_index_unavailable_keeps_the_account_and_a_rerun_leaves_nothing(
    owner, outsider, monkeypatch
):
    mine, theirs = editing(owner), editing(outsider)
    assert all(len(spilled(sid)) == 1 for sid in mine + theirs)

    @deletion_safe
    def unreadable(self):  # type: ignore[no-untyped-def]
        raise ActorUnavailable()

    monkeypatch.setattr(RepoSessionIndex, "blob_prefixes", unreadable)
    with pytest.raises(CommandError, match="retained at step out_of_band"):
        purge(owner.email)
    deletion = AccountDeletion.objects.get(subject_user_id=owner.stable_user_id)
    assert deletion.status == DeletionStatus.RETAINED
    assert User.objects.filter(pk=owner.pk).exists()
    assert all(len(spilled(sid)) == 1 for sid in mine)

    monkeypatch.undo()
    assert "complete" in purge(owner.email)
    assert not User.objects.filter(pk=owner.pk).exists()
    assert [spilled(sid) for sid in mine] == [[], []]
    assert not RepoSessionDueOwner.objects.filter(user_id=owner.stable_user_id).exists()
    assert not UserStorageBucket.objects.filter(user_id=owner.stable_user_id).exists()
    # The other person's sessions are whole.
    assert all(len(spilled(sid)) == 1 for sid in theirs)
    listed = Agent(outsider).call("repoListSessions")["sessions"]
    assert sorted(s["id"] for s in listed) == sorted(theirs)


def test_export_carries_the_catalog_and_names_the_workspaces_it_leaves_out(owner, outsider):
    mine = editing(owner)
    editing(outsider)
    manifest = export.manifest(owner)
    assert {"section": "repo_session_index", "actor": RepoSessionIndex.name, "count": None} in (
        manifest["sections"]
    )
    excluded = {s["name"]: s["reason"] for s in manifest["excludedSurfaces"]}
    assert "ephemeral" in excluded["repo_session"]
    assert "ephemeral" in excluded["repo-session:{sessionId}/"]
    page = export.section(owner, "repo_session_index")["page"]
    assert sorted(r["id"] for r in page["repo_sessions"]) == sorted(mine)
    assert {r["status"] for r in page["repo_sessions"]} == {"active"}
    assert "content" not in str(page)
