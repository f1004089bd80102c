"""Operator rows that name a deleted person keep the record and lose the person.

``package_codemod_runs`` is the operator's history of a codemod: the row stays, its user
columns become ``deleted-user`` — and so does every mention of the person inside
``filters_json`` (a scope, a list of ids, an id inside a longer string), as the registry in
``apps/accounts/surfaces.py`` promises. Nobody else's id in the same row changes.
"""

from __future__ import annotations

import io
import secrets

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import override_settings

from apps.accounts.surface_kinds import DELETED_USER
from apps.packages.models import PackageCodemodRun
from config.buckets import bucket_storages
from tests.accounts.factories import UserFactory
from tests.packages.factories import PackageCodemodRunFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


@pytest.fixture(autouse=True)
def fs_buckets(tmp_path):  # type: ignore[no-untyped-def]
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield tmp_path


def test_a_codemod_runs_filters_forget_the_deleted_person_and_keep_everyone_else():
    gone = UserFactory(username=f"gone-{secrets.token_hex(3)}")
    kept = UserFactory(username=f"kept-{secrets.token_hex(3)}")
    operator_id = kept.stable_user_id
    them = gone.stable_user_id
    run = PackageCodemodRunFactory(
        scope_user_id=them,
        initiated_by_user_id=operator_id,
        filters_json={
            "scopeUserId": them,
            "userIds": [them, kept.stable_user_id],
            "note": f"requested for user:{them}",
            "kodyIdPrefix": "@pkg/",
        },
    )
    unrelated = PackageCodemodRunFactory(
        initiated_by_user_id=operator_id, filters_json={"userIds": [kept.stable_user_id]}
    )

    call_command("purge_account", gone.email, "--yes", stdout=io.StringIO())

    run = PackageCodemodRun.objects.get(pk=run.pk)
    assert run.scope_user_id == DELETED_USER and run.initiated_by_user_id == operator_id
    assert run.filters_json == {
        "scopeUserId": DELETED_USER,
        "userIds": [DELETED_USER, kept.stable_user_id],
        "note": f"requested for user:{DELETED_USER}",
        "kodyIdPrefix": "@pkg/",
    }
    assert PackageCodemodRun.objects.get(pk=unrelated.pk).filters_json == {
        "userIds": [kept.stable_user_id]
    }
