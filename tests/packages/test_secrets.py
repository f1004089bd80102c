"""Secrets: sealed at rest, listed without values, gated for use, rotatable, never leaked."""

from __future__ import annotations

import base64
import io
import json
import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.packages.models import SavedPackage, SecretBucket, SecretEntry
from apps.packages.services import crypto, secrets
from tests.community.factories import CommunityForkFactory
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

VALUE = "sk-live-Zq8v3-SECRET-VALUE-do-not-leak"


@pytest.fixture(autouse=True)
def fresh_keyring():
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


def package(user, name: str) -> SavedPackage:
    return SavedPackageFactory(
        user_id=user.stable_user_id, name=name, kody_id=f"@x/{name}", source_id=f"src-{name}"
    )


def test_owner_saves_a_secret_that_is_sealed_and_never_returned(as_owner, owner):
    reply = as_owner.call(
        "secretSet", name="STRIPE_KEY", value=VALUE, allowedHosts=["API.stripe.com"]
    )
    assert reply == {"secret": reply["secret"]} and "value" not in reply["secret"]
    assert reply["secret"]["allowedHosts"] == ["api.stripe.com"]
    entry = SecretEntry.objects.get(name="STRIPE_KEY")
    assert entry.bucket.user_id == owner.stable_user_id and entry.key_id == "k0"
    assert VALUE not in entry.encrypted_value
    assert VALUE.encode() not in base64.b64decode(entry.encrypted_value)

    listed = as_owner.call("secretList")["secrets"]
    assert [s["name"] for s in listed] == ["STRIPE_KEY"]
    assert VALUE not in str(listed)

    pkg = package(owner, "billing")
    plain = secrets.resolve_for_use(
        owner.stable_user_id, "STRIPE_KEY", package_id=pkg.id, host="api.stripe.com"
    )
    assert plain == VALUE

    assert as_owner.call("secretDelete", name="STRIPE_KEY") == {
        "deleted": True,
        "name": "STRIPE_KEY",
    }
    assert not SecretEntry.objects.exists()


def test_set_many_saves_all_or_nothing(as_owner, owner):
    good = {"name": "A", "value": "one"}
    error = as_owner.error("secretSetMany", 422, secrets=[good, {"name": "B", "value": ""}])
    assert error["code"] == "invalid_input"
    assert not SecretEntry.objects.exists()
    as_owner.error("secretSetMany", 422, secrets=[good, good])
    saved = as_owner.call("secretSetMany", secrets=[good, {"name": "B", "value": "two"}])
    assert [s["name"] for s in saved["secrets"]] == ["A", "B"]
    assert SecretEntry.objects.filter(bucket__user_id=owner.stable_user_id).count() == 2


def test_package_secrets_need_a_package_the_caller_owns(as_owner, as_outsider, owner):
    pkg = package(owner, "weather")
    as_owner.call("secretSet", name="TOKEN", value=VALUE, scope="package", bindingKey=pkg.id)
    assert SecretBucket.objects.get(scope="package").binding_key == pkg.id
    error = as_outsider.error(
        "secretSet", 404, name="TOKEN", value="x", scope="package", bindingKey=pkg.id
    )
    assert error["code"] == "not_found"
    assert as_outsider.call("secretList", scope="package", bindingKey=pkg.id)["secrets"] == []


def test_outsider_sees_and_deletes_nothing(as_owner, as_outsider, owner):
    as_owner.call("secretSet", name="STRIPE_KEY", value=VALUE)
    assert as_outsider.call("secretList")["secrets"] == []
    assert as_outsider.error("secretDelete", 404, name="STRIPE_KEY")["code"] == "secret_not_found"
    # The outsider's own secret of the same name is a different row.
    as_outsider.call("secretSet", name="STRIPE_KEY", value="theirs")
    assert SecretEntry.objects.filter(name="STRIPE_KEY").count() == 2
    outsider_pkg = package(as_outsider.user, "thief")
    with pytest.raises(secrets.SecretNotGranted):
        secrets.resolve_for_use(
            owner.stable_user_id, "STRIPE_KEY", package_id=outsider_pkg.id, host="x"
        )


def test_grants_gate_every_use(owner, outsider):
    uid = owner.stable_user_id
    [meta] = secrets.set_many(uid, [secrets.NewSecret("KEY", VALUE, allowed_hosts=["api.x.com"])])
    mine = package(owner, "mine")
    fork = package(owner, "forked")
    CommunityForkFactory(
        forker_user_id=uid,
        forked_package_id=fork.id,
        forked_source_id="src-f",
        target_kody_id="@x/forked",
    )
    use = secrets.resolve_for_use
    assert use(uid, "KEY", package_id=mine.id, host="api.x.com") == VALUE
    with pytest.raises(secrets.SecretNotGranted):  # the host allowlist is its own gate
        use(uid, "KEY", package_id=mine.id, host="evil.example")
    with pytest.raises(secrets.SecretNotGranted):  # an unadopted fork needs the grant
        use(uid, "KEY", package_id=fork.id, host="api.x.com")
    assert secrets.set_allowed_packages(uid, "KEY", [fork.id, "not-mine"])["allowedPackages"] == [
        fork.id
    ]
    assert use(uid, "KEY", package_id=fork.id, host="api.x.com") == VALUE

    SecretEntry.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(secrets.SecretNotFound):  # expired: missing for use, still listed
        use(uid, "KEY", package_id=mine.id, host="api.x.com")
    assert secrets.list_secrets(uid)[0]["expired"] is True


def test_adopted_forks_use_user_secrets_without_a_grant(owner):
    uid = owner.stable_user_id
    secrets.set_many(uid, [secrets.NewSecret("KEY", VALUE, allowed_hosts=["h"])])
    fork = package(owner, "adopted")
    CommunityForkFactory(
        forker_user_id=uid,
        forked_package_id=fork.id,
        forked_source_id="s",
        target_kody_id="@x/adopted",
        adopted_at=timezone.now(),
    )
    assert secrets.resolve_for_use(uid, "KEY", package_id=fork.id, host="h") == VALUE


def test_a_ciphertext_moved_to_another_row_does_not_open(owner, outsider):
    secrets.set_many(owner.stable_user_id, [secrets.NewSecret("KEY", VALUE, allowed_hosts=["h"])])
    secrets.set_many(outsider.stable_user_id, [secrets.NewSecret("KEY", "x", allowed_hosts=["h"])])
    stolen = SecretEntry.objects.get(bucket__user_id=owner.stable_user_id)
    SecretEntry.objects.filter(bucket__user_id=outsider.stable_user_id).update(
        encrypted_value=stolen.encrypted_value
    )
    pkg = package(outsider, "p")
    with pytest.raises(crypto.Undecryptable):
        secrets.resolve_for_use(outsider.stable_user_id, "KEY", package_id=pkg.id, host="h")


def test_rotate_secret_key_reseals_under_the_new_key(owner, settings):
    old = base64.b64encode(b"o" * 32).decode()
    new = base64.b64encode(b"n" * 32).decode()
    settings.KODY_SECRET_KEYS = [f"old:{old}"]
    settings.KODY_SECRET_KEY_ID = "old"
    uid = owner.stable_user_id
    secrets.set_many(uid, [secrets.NewSecret("KEY", VALUE, allowed_hosts=["h"])])
    assert SecretEntry.objects.get().key_id == "old"

    settings.KODY_SECRET_KEYS = [f"old:{old}", f"new:{new}"]
    settings.KODY_SECRET_KEY_ID = "new"
    crypto.keyring.cache_clear()
    out = io.StringIO()
    call_command("rotate_secret_key", stdout=out)
    assert out.getvalue().strip() == (
        "rotate_secret_key key_id=new resealed=1 from=old:1 unreadable=0 remaining=0"
    )
    assert SecretEntry.objects.get().key_id == "new"

    settings.KODY_SECRET_KEYS = [f"new:{new}"]
    crypto.keyring.cache_clear()
    pkg = package(owner, "p")
    assert secrets.resolve_for_use(uid, "KEY", package_id=pkg.id, host="h") == VALUE


def test_no_response_log_line_or_export_ever_carries_a_secret_value(
    as_owner, owner, caplog, tmp_path, settings
):
    settings.KODY_ACTORS_INLINE = True  # the export reads each actor's pages
    caplog.set_level(logging.DEBUG)
    other = VALUE + "-2"
    responses = [
        as_owner.raw("secretSet", name="A", value=VALUE, allowedHosts=["h"]),
        as_owner.raw("secretSetMany", secrets=[{"name": "B", "value": other}]),
        as_owner.raw("secretSetMany", secrets=[{"name": "C", "value": VALUE, "oops": 1}]),
        as_owner.raw("secretSetMany", secrets=[VALUE]),
        as_owner.raw("secretSet", name="bad name", value=VALUE),
        as_owner.raw("secretSet", name="D", value=VALUE, expiresAt="not-a-date"),
        as_owner.raw("secretSet", name="E", value=[VALUE]),
        as_owner.raw("secretSet", name="F", value=VALUE, scope="package", bindingKey="nope"),
        as_owner.raw("secretList"),
        as_owner.raw("secretDelete", name="A"),
    ]
    assert [r.status_code for r in responses] == [200, 200, 422, 422, 422, 422, 422, 404, 200, 200]
    for response in responses:
        assert VALUE not in response.content.decode()
    out = tmp_path / "export"
    call_command("export_account", owner.email, "--out", str(out), "--no-progress")
    exported = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert '"B"' in exported and "secret_entries" in exported  # the secret's row is exported
    assert VALUE not in exported
    assert SecretEntry.objects.get(name="B").encrypted_value not in exported
    assert any("secrets saved" in r.getMessage() for r in caplog.records)  # logs were read
    for record in caplog.records:
        line = record.getMessage() + repr(record.args) + str(record.exc_info)
        assert VALUE not in line


def test_a_jwt_is_signed_with_a_stored_key_that_is_never_revealed(as_owner, as_outsider):
    import jwt

    as_owner.call("secretSet", name="SIGNING_KEY", value=VALUE)
    signed = as_owner.call("secretJwtSign", secretName="SIGNING_KEY", claims={"sub": "ada", "n": 1})
    assert jwt.decode(signed["jwt"], VALUE, algorithms=["HS256"]) == {"sub": "ada", "n": 1}
    assert VALUE not in json.dumps(signed)
    # Code in the sandbox signs the same way, and never sees the key either.
    code = "async () => (await kody.secretJwtSign({secretName: 'SIGNING_KEY', claims: {a: 1}}))"
    reply = as_owner.call("execute", code=code)
    assert jwt.decode(reply["result"]["jwt"], VALUE, algorithms=["HS256"]) == {"a": 1}
    bad = as_owner.error("secretJwtSign", 422, secretName="SIGNING_KEY", claims={}, alg="RS256")
    assert bad["code"] == "jwt_sign_failed" and VALUE not in json.dumps(bad)
    missing = as_outsider.error("secretJwtSign", 404, secretName="SIGNING_KEY", claims={})
    assert missing["code"] == "secret_not_found"
