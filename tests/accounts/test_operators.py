"""The ``operators`` group: an operator sees every model in /admin/ and changes only the
moderation and support ones, never a credential table; an ordinary user gets nothing."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from django.test import Client

from apps.accounts import operators
from apps.accounts.models import User
from apps.accounts.services import identity
from tests.accounts.factories import UserFactory
from tests.cast import PASSWORD

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def provisioned_operator() -> User:
    """Made as ``create_user --staff`` makes one (the cast's operator is a superuser)."""
    return identity.provision(
        email="op1@example.com", username="anna-op", password=PASSWORD, staff=True
    )


def test_the_group_views_every_model_and_changes_only_moderation_and_support() -> None:
    group = Group.objects.get(name=operators.GROUP)
    codes = set(group.permissions.values_list("content_type__app_label", "codename"))
    for model in apps.get_models():
        meta = model._meta
        assert (meta.app_label, f"view_{meta.model_name}") in codes, meta.label
    changes = {(app, code) for app, code in codes if not code.startswith("view_")}
    assert changes == {
        *((app, f"change_{model}") for app, model in operators.CHANGE),
        *((app, f"add_{model}") for app, model in operators.ADD),
    }
    assert not any(code.startswith("delete_") for _, code in codes)


def test_no_changeable_model_holds_a_credential_column() -> None:
    credential = ("password", "hash", "secret", "ciphertext", "private_key")
    for app_label, model_name in operators.CHANGE:
        model = apps.get_model(app_label, model_name)
        names = [f.name for f in model._meta.get_fields() if hasattr(f, "column")]
        assert not [n for n in names if any(c in n for c in credential)], model


def test_an_operator_sees_models_in_the_admin(client: Client, provisioned_operator: User) -> None:
    client.force_login(provisioned_operator)
    index = client.get("/admin/").content.decode()
    assert "have permission to view or edit anything" not in index
    assert "/admin/community/communityreport/" in index
    assert client.get("/admin/accounts/user/").status_code == 200
    assert client.get("/admin/community/communityreport/add/").status_code == 403
    assert client.get("/admin/auth/group/add/").status_code == 403


def test_an_ordinary_user_gets_no_admin(client: Client) -> None:
    client.force_login(UserFactory())
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response.url
