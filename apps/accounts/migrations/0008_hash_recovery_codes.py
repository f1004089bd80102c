"""Recovery codes made before they were hashed: replace each plain code with its keyed digest.

The digest is the one ``apps.accounts.services.recovery_codes`` checks (HMAC-SHA256 under
SECRET_KEY, base32, sixteen characters), written out here so that later changes to the service
do not change what this migration did. A row already sixteen characters long is a digest (plain
django-otp codes are eight) and is left alone, so running it on a half-migrated table is safe.
"""

from base64 import b32encode

from django.db import migrations
from django.utils.crypto import salted_hmac

SALT = "kody.accounts.recovery-code"


def _digest(code: str) -> str:
    plain = "".join(ch for ch in code.lower() if ch not in " -\t\n")[:64]
    mac = salted_hmac(SALT, plain, algorithm="sha256").digest()
    return b32encode(mac).decode().lower()[:16]


def hash_plain_codes(apps, schema_editor):
    StaticToken = apps.get_model("otp_static", "StaticToken")
    for token in StaticToken.objects.all().iterator():
        if len(token.token) < 16:
            token.token = _digest(token.token)
            token.save(update_fields=["token"])


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0007_user_time_zone"),
        ("otp_static", "0003_add_timestamps"),
    ]

    operations = [
        # One way: a digest cannot be turned back into the code it came from.
        migrations.RunPython(hash_plain_codes, migrations.RunPython.noop),
    ]
