"""Secret keys: leaving the key derived from SECRET_KEY for configured keys loses nothing.

Before KODY_SECRET_KEYS is set every row is sealed with ``k0``, derived from the Django
secret key. Configuring keys must keep those rows readable until ``rotate_secret_key`` has
re-sealed them all, and the command says what it re-sealed, from which keys, and what is left.
"""

from __future__ import annotations

import base64
import io

import pytest
from django.core.management import CommandError, call_command

from apps.packages.models import SavedPackage, SecretEntry
from apps.packages.services import crypto, secrets
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

NEW = base64.b64encode(b"n" * 32).decode()
OLD = base64.b64encode(b"o" * 32).decode()


@pytest.fixture(autouse=True)
def fresh_keyring(settings):  # type: ignore[no-untyped-def]
    settings.KODY_SECRET_KEYS = []
    settings.KODY_SECRET_KEY_ID = None
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


def configure(settings, *pairs: str, current: str) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_SECRET_KEYS = list(pairs)
    settings.KODY_SECRET_KEY_ID = current
    crypto.keyring.cache_clear()


def save(user, name: str, value: str) -> None:  # type: ignore[no-untyped-def]
    secrets.set_many(user.stable_user_id, [secrets.NewSecret(name, value, allowed_hosts=["h"])])


def read(user, name: str) -> str:  # type: ignore[no-untyped-def]
    tag = f"{user.username}-{name}-{SavedPackage.objects.count()}"
    package = SavedPackageFactory(
        user_id=user.stable_user_id, name=f"p-{tag}", kody_id=f"@x/p-{tag}", source_id=f"s-{tag}"
    )
    return secrets.resolve_for_use(user.stable_user_id, name, package_id=package.id, host="h")


def rotate() -> str:
    out = io.StringIO()
    call_command("rotate_secret_key", stdout=out)
    return out.getvalue().strip()


def test_moving_from_the_derived_key_to_configured_keys_keeps_every_row_readable(
    settings, owner, outsider
):
    save(owner, "A", "alpha")
    save(outsider, "B", "bravo")
    assert set(SecretEntry.objects.values_list("key_id", flat=True)) == {"k0"}

    configure(settings, f"new:{NEW}", current="new")

    assert read(owner, "A") == "alpha" and read(outsider, "B") == "bravo"
    save(owner, "C", "charlie")  # new writes use the configured key
    assert SecretEntry.objects.get(name="C").key_id == "new"

    assert rotate() == (
        "rotate_secret_key key_id=new resealed=2 from=k0:2 unreadable=0 remaining=0"
    )
    assert set(SecretEntry.objects.values_list("key_id", flat=True)) == {"new"}
    # No row needs the derived key any more: even a new Django secret key changes nothing.
    settings.SECRET_KEY = "a different django secret key"
    crypto.keyring.cache_clear()
    assert [read(owner, "A"), read(outsider, "B"), read(owner, "C")] == [
        "alpha",
        "bravo",
        "charlie",
    ]
    assert rotate() == "rotate_secret_key key_id=new resealed=0 from=- unreadable=0 remaining=0"


def test_a_row_no_key_opens_fails_the_rotation_and_is_kept(settings, owner):
    configure(settings, f"old:{OLD}", current="old")
    save(owner, "A", "alpha")
    sealed = SecretEntry.objects.get(name="A").encrypted_value
    configure(settings, f"new:{NEW}", current="new")  # "old" was dropped too early

    with pytest.raises(CommandError, match=r"1 secret entries open with no key here \(old:1\)"):
        rotate()

    entry = SecretEntry.objects.get(name="A")
    assert entry.key_id == "old" and entry.encrypted_value == sealed
    configure(settings, f"old:{OLD}", f"new:{NEW}", current="new")
    assert rotate().startswith("rotate_secret_key key_id=new resealed=1 from=old:1")
    assert read(owner, "A") == "alpha"
