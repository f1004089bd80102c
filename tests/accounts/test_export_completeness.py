"""Export as the seed defines it: the manifest page says it is only the manifest, every actor
is summarised in ``durable_object_summaries``, and ``r2_object`` carries the icons of the
person's own community listings and repos — never anyone else's."""

from __future__ import annotations

import io
import secrets
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.test import override_settings

from apps.accounts.export import service
from apps.accounts.models import User
from apps.jobs.actor import StorageRunner
from config.buckets import bucket_storages
from kody import blobs
from tests.accounts.factories import UserFactory
from tests.community.factories import CommunityListingFactory
from tests.packages.factories import EntitySourceFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _setup(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield


def person(name: str) -> User:
    return UserFactory(username=f"{name}-{secrets.token_hex(3)}")


def with_icons(user: User) -> tuple[str, str]:
    """A listing with its community icon and a repo with its identity icon."""
    tag = user.stable_user_id[:10]
    listing = CommunityListingFactory(
        id=f"lst-{tag}",
        owner_user_id=user.stable_user_id,
        package_id=f"pkg-{tag}",
        kody_id=f"@{user.username}/weather",
    )
    source = EntitySourceFactory(
        id=f"src-{tag}", user_id=user.stable_user_id, entity_id=f"e-{tag}", repo_id=f"repo-{tag}"
    )
    community = blobs.community_icon_key(listing.id, "c1")
    identity = blobs.identity_icon_key(source.repo_id, "c1")
    assets = blobs.bucket("community_assets")
    assets.save(community, ContentFile(b"community icon of " + user.username.encode()))
    assets.save(identity, ContentFile(b"identity icon of " + user.username.encode()))
    return community, identity


def exported_keys(user: User) -> list[str]:
    keys, cursor = [], None
    for _ in range(100):
        page = service.section(user, "r2_object", cursor=cursor)
        if page["object"] is not None:
            keys.append(page["object"]["key"])
        cursor = page["nextCursor"]
        if cursor is None:
            return keys
    raise AssertionError("r2_object never ended")


def test_the_manifest_page_says_it_is_only_the_manifest(client):
    owner = person("owner")
    client.force_login(owner)

    response = client.get("/account/export.json")

    assert response.status_code == 200
    assert response["X-Kody-Export-Completeness"] == "manifest-only"
    assert response.json()["chunking"]["capability"] == "accountExportSection"


def test_durable_object_summaries_cover_every_actor_and_only_ones_own_state():
    owner, outsider = person("owner"), person("outsider")
    StorageRunner.call(owner.stable_user_id, "set_value", storage_id="job:j1", key="k", value=1)

    listed = [s["section"] for s in service.manifest(owner)["sections"]]
    mine = service.section(owner, "durable_object_summaries")["page"]["summaries"]
    theirs = service.section(outsider, "durable_object_summaries")["page"]["summaries"]

    assert "durable_object_summaries" in listed
    assert {s["actor"] for s in mine} == set(service.actor_surfaces())
    storage = {s["actor"]: s for s in mine}[StorageRunner.name]
    assert storage["hasState"] is True and storage["exportSection"] == "storage_runner"
    assert {s["actor"]: s for s in theirs}[StorageRunner.name]["hasState"] is False


def test_r2_object_carries_ones_own_listing_and_repo_icons_only():
    owner, outsider = person("owner"), person("outsider")
    mine = with_icons(owner)
    theirs = with_icons(outsider)

    keys = exported_keys(owner)

    assert set(mine) <= set(keys)
    assert not set(theirs) & set(keys)
    r2 = next(s for s in service.manifest(owner)["sections"] if s["section"] == "r2_object")
    assert r2["count"] == len(keys) == 2


def test_icons_travel_through_export_and_import(tmp_path: Path):
    owner = person("owner")
    community, identity = with_icons(owner)
    out = tmp_path / "export"
    call_command("export_account", owner.email, "--out", str(out), "--no-progress")
    assert (out / "blobs" / "community_assets" / community).read_bytes().startswith(b"community")
    assert (out / "sections" / "durable_object_summaries.jsonl").is_file()
    call_command("purge_account", owner.email, "--yes", stdout=io.StringIO())
    assert not blobs.bucket("community_assets").exists(community)
    assert not blobs.bucket("community_assets").exists(identity)  # deletion took both

    call_command("import_account", str(out), "--no-reindex", stdout=io.StringIO())

    assets = blobs.bucket("community_assets")
    assert assets.open(community).read() == b"community icon of " + owner.username.encode()
    assert assets.open(identity).read() == b"identity icon of " + owner.username.encode()
