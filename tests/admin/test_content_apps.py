"""Every packages/community/mailbox model has a working admin changelist that never shows a
credential column or value."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from apps.packages import models as p
from kody.adminkit import NoAddModelAdmin, ReadOnlyModelAdmin
from tests.rows import make

pytestmark = pytest.mark.django_db

OWN_APPS = ("packages", "community", "mailbox")
OWN_MODELS = [model for label in OWN_APPS for model in apps.get_app_config(label).get_models()]

CREDENTIAL_COLUMNS = {
    p.SecretEntry: ("encrypted_value", "lookup_hash"),
    p.RemoteConnectorSetting: ("encrypted_shared_secret",),
    p.PackageInvocationToken: ("token_hash",),
    p.RepoToken: ("token_hash",),
    p.WebhookEndpoint: ("url_secret_hash", "url_secret_encrypted"),
}
CREDENTIAL_VALUES = (
    "SECRET-CIPHERTEXT",
    "LOOKUP-HASH",
    "RC-CIPHERTEXT",
    "TOKEN-HASH-1",
    "URL-SECRET-HASH",
    "URL-CIPHERTEXT",
)


def _url(model, name: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{name}", args=args)


def test_every_model_is_registered():
    assert [m.__name__ for m in OWN_MODELS if not admin.site.is_registered(m)] == []


@pytest.mark.parametrize("model", OWN_MODELS, ids=lambda m: m._meta.db_table)
def test_changelist_renders_without_credentials(operator_client, model):
    make(model)
    response = operator_client.get(_url(model, "changelist"))
    assert response.status_code == 200
    body = response.content.decode()
    for column in CREDENTIAL_COLUMNS.get(model, ()):
        assert column not in body
    assert not [value for value in CREDENTIAL_VALUES if value in body]


@pytest.mark.parametrize("model", list(CREDENTIAL_COLUMNS), ids=lambda m: m._meta.db_table)
def test_change_form_never_shows_a_credential(operator_client, model):
    row = make(model)
    response = operator_client.get(_url(model, "change", row.pk))
    assert response.status_code == 200
    body = response.content.decode()
    shown = [c for c in CREDENTIAL_COLUMNS[model] if f'name="{c}"' in body or f"field-{c}" in body]
    assert shown == []
    assert not [value for value in CREDENTIAL_VALUES if value in body]


@pytest.mark.parametrize(
    "model",
    [
        m
        for m in OWN_MODELS
        if isinstance(admin.site._registry[m], (ReadOnlyModelAdmin, NoAddModelAdmin))
    ],
    ids=lambda m: m._meta.db_table,
)
def test_derived_and_credential_rows_cannot_be_added_by_hand(operator_client, model):
    assert operator_client.get(_url(model, "add")).status_code == 403
