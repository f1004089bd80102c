"""/account/memories and /account/secrets: the owner's rows only, values never rendered."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.packages.models import McpMemory, SecretEntry
from apps.packages.services import memories, secrets
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

VALUE = "ghp_PAGE-SECRET-VALUE-xyz"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_memories_page_lists_searches_and_deletes_the_owners_memories(owner, outsider):
    mine = memories.upsert(owner.stable_user_id, subject="Likes tea", summary="Green tea.")
    memories.upsert(outsider.stable_user_id, subject="Likes cats", summary="Two cats.")
    client = signed_in(owner)
    body = client.get("/account/memories").content.decode()
    assert "Likes tea" in body and "Likes cats" not in body and "csrfmiddlewaretoken" in body
    assert "Likes tea" in client.get("/account/memories?q=tea").content.decode()

    response = client.post(f"/account/memories/{mine.id}/delete")
    assert response.status_code == 302
    assert McpMemory.objects.get(id=mine.id).status == "deleted"


def test_outsider_cannot_delete_the_owners_memory_from_the_page(owner, outsider):
    mine = memories.upsert(owner.stable_user_id, subject="Likes tea", summary="Green tea.")
    response = signed_in(outsider).post(f"/account/memories/{mine.id}/delete")
    assert response.status_code == 404
    assert McpMemory.objects.get(id=mine.id).status == "active"
    assert "Likes tea" not in signed_in(outsider).get("/account/memories").content.decode()


def test_secrets_page_lists_names_and_grants_never_values(owner, outsider):
    uid = owner.stable_user_id
    token = secrets.NewSecret("GITHUB_TOKEN", VALUE, allowed_hosts=["api.github.com"])
    secrets.set_many(uid, [token])
    pkg = SavedPackageFactory(user_id=uid, name="prs", kody_id="@o/prs", source_id="src-prs")
    client = signed_in(owner)
    body = client.get("/account/secrets").content.decode()
    assert "GITHUB_TOKEN" in body and "api.github.com" in body and "prs" in body
    assert VALUE not in body
    assert SecretEntry.objects.get().encrypted_value not in body

    assert (
        client.post(
            "/account/secrets/grants", {"name": "GITHUB_TOKEN", "packages": [pkg.id]}
        ).status_code
        == 302
    )
    assert SecretEntry.objects.get().allowed_packages == [pkg.id]

    other = signed_in(outsider)
    assert "GITHUB_TOKEN" not in other.get("/account/secrets").content.decode()
    assert other.post("/account/secrets/delete", {"name": "GITHUB_TOKEN"}).status_code == 404
    assert (
        other.post(
            "/account/secrets/grants", {"name": "GITHUB_TOKEN", "packages": [pkg.id]}
        ).status_code
        == 404
    )
    assert SecretEntry.objects.count() == 1

    assert client.post("/account/secrets/delete", {"name": "GITHUB_TOKEN"}).status_code == 302
    assert not SecretEntry.objects.exists()


def test_pages_need_a_signed_in_user():
    assert Client().get("/account/secrets").status_code == 302
    assert Client().get("/account/memories").status_code == 302
