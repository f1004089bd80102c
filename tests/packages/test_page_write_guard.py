"""Account pages that change something (memories, secrets, grants) take the same write guard as
the capabilities: refused once the account's deletion has started, and holding a write lease
while they run, so the deletion's drain waits for a page write in flight."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.models import User
from apps.entitlements.services import metering
from apps.packages.models import McpMemory, SecretEntry
from apps.packages.services import memories, secrets

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def start_deleting(user: User) -> None:
    """What the deletion's ``mark`` step does first: the account row says it is going."""
    User.objects.filter(pk=user.pk).update(deleting_at=timezone.now())


def test_a_deleting_accounts_page_writes_are_refused_and_change_nothing(owner):
    uid = owner.stable_user_id
    memory = memories.upsert(uid, subject="Likes tea", summary="Green tea.")
    secrets.set_many(uid, [secrets.NewSecret("API_KEY", "v")])
    client = signed_in(owner)
    start_deleting(owner)

    refused = client.post(f"/account/memories/{memory.id}/delete")
    assert refused.status_code == 409
    assert "account_deleting" in refused.content.decode()
    assert McpMemory.objects.get(id=memory.id).status == "active"

    refused = client.post("/account/secrets/delete", {"name": "API_KEY"})
    assert refused.status_code == 409
    assert SecretEntry.objects.filter(bucket__user_id=uid, name="API_KEY").exists()

    refused = client.post("/account/secrets/grants", {"name": "API_KEY", "packages": []})
    assert refused.status_code == 409


def test_a_page_write_holds_a_write_lease_while_it_runs(owner, monkeypatch):
    """The lease is what the deletion's drain waits for: a page write is one of them."""
    uid = owner.stable_user_id
    memory = memories.upsert(uid, subject="Likes tea", summary="Green tea.")
    seen: list[list[str]] = []
    real_delete = memories.delete

    def delete_and_look(user_id: str, memory_id: str):  # type: ignore[no-untyped-def]
        seen.append([lease["holder"] for lease in metering.list_write_leases(user_id)])
        return real_delete(user_id, memory_id)

    monkeypatch.setattr(memories, "delete", delete_and_look)
    response = signed_in(owner).post(f"/account/memories/{memory.id}/delete")
    assert response.status_code == 302
    assert seen == [["ui:memory_delete"]]
    assert metering.list_write_leases(uid) == []  # released after the write


def test_someone_elses_deletion_does_not_stop_the_owners_page_writes(owner, outsider):
    memory = memories.upsert(owner.stable_user_id, subject="Likes tea", summary="Green tea.")
    start_deleting(outsider)
    response = signed_in(owner).post(f"/account/memories/{memory.id}/delete")
    assert response.status_code == 302
    assert McpMemory.objects.get(id=memory.id).status == "deleted"
