"""Saved-package vectors (seed 000): ``package_{id}`` (or the digest form) with
``{kind, userId}`` in the owner's namespace; ranked search shows the owner's visible packages."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from apps.packages.models import SavedPackage
from apps.packages.services import index_debt, search
from kody.capabilities import Context
from kody.vectors.ids import vector_id
from kody.vectors.models import VectorEntry
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def saved(user, name: str, description: str, **extra) -> SavedPackage:  # type: ignore[no-untyped-def]
    package = SavedPackageFactory(
        user_id=user.stable_user_id,
        name=name,
        kody_id=f"@{user.username}/{name}",
        source_id=f"src-{user.username}-{name}",
        description=description,
        **extra,
    )
    index_debt.changed("package", user.stable_user_id, [package.id])  # what a writer does
    return package


def package_vectors(user) -> set[str]:
    rows = VectorEntry.objects.filter(namespace=user.stable_user_id, metadata__kind="package")
    return set(rows.values_list("vector_id", flat=True))


def found(user, query: str) -> list[str]:
    hits = search.search(Context(user=user), query, limit=20, domain="packages")
    return [h["id"] for h in hits if h["type"] == "package"]


def test_owner_finds_their_visible_packages(owner):
    weather = saved(owner, "weather", "Daily weather forecast for my city")
    hidden = saved(owner, "secret-forecast", "Weather forecast, hidden", hidden=True)
    assert package_vectors(owner) == {f"package_{weather.id}", f"package_{hidden.id}"}
    vector = VectorEntry.objects.get(vector_id=f"package_{weather.id}")
    assert vector.metadata == {"kind": "package", "userId": owner.stable_user_id}
    assert found(owner, "weather forecast")[0] == weather.id
    assert hidden.id not in found(owner, "weather forecast")


def test_an_outsider_never_finds_the_owners_package(owner, outsider, as_outsider):
    weather = saved(owner, "weather", "Daily weather forecast for my city")
    saved(outsider, "recipes", "Cooking recipes")
    assert found(outsider, "weather forecast") == []
    body = as_outsider.call("search", query="Daily weather forecast for my city")
    assert weather.id not in str(body)
    assert package_vectors(outsider) == {f"package_{SavedPackage.objects.get(name='recipes').id}"}


def test_a_deleted_package_loses_its_vector(owner):
    weather = saved(owner, "weather", "Daily weather forecast")
    SavedPackage.objects.filter(id=weather.id).delete()
    index_debt.changed("package", owner.stable_user_id, [weather.id])
    assert package_vectors(owner) == set()


def test_reindex_kind_package_rebuilds_and_sweeps_long_ids(owner, outsider):
    long_id = "p" * 60  # fits the column, not the 64-byte id with its prefix
    SavedPackageFactory(id=long_id, user_id=owner.stable_user_id, source_id="src-long")
    SavedPackageFactory(user_id=outsider.stable_user_id, kody_id="@x/y", source_id="src-x")
    out = io.StringIO()
    call_command("reindex", "--kind", "package", stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith("reindex scanned=2 embedded=2 skipped=0 deleted_orphans=0")
    assert package_vectors(owner) == {vector_id("package", long_id)}
    assert vector_id("package", long_id).startswith("package_sha256:")
    SavedPackage.objects.filter(id=long_id).delete()
    out = io.StringIO()
    call_command(
        "reindex", "--kind", "package", "--user", owner.email, stdout=out, stderr=io.StringIO()
    )
    assert out.getvalue().startswith("reindex scanned=0 embedded=0 skipped=0 deleted_orphans=1")
    assert package_vectors(owner) == set() and len(package_vectors(outsider)) == 1
