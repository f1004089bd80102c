"""Database-level ON DELETE CASCADE for inbox addresses, and the permanent graph marker.

User email write paths fail closed without the email_user_graph_authority row, so it is
created with the schema (the original seeded it in its baseline migration). Nothing was ever
frozen or dropped here, so owner_count is 0 and both stamps are the install time.
"""

from django.db import migrations
from django.utils import timezone


def create_marker(apps, schema_editor) -> None:
    marker = apps.get_model("mailbox", "EmailUserGraphAuthority")
    now = timezone.now()
    marker.objects.get_or_create(
        id=1, defaults={"owner_count": 0, "frozen_at": now, "dropped_at": now}
    )


class Migration(migrations.Migration):
    dependencies = [("mailbox", "0001_initial")]

    operations = [
        migrations.RunSQL(
            sql=(
                "ALTER TABLE email_inbox_addresses ADD CONSTRAINT email_inbox_addresses_inbox_fk "
                "FOREIGN KEY (inbox_id) REFERENCES email_inboxes (id) ON DELETE CASCADE"
            ),
            reverse_sql=(
                "ALTER TABLE email_inbox_addresses DROP CONSTRAINT email_inbox_addresses_inbox_fk"
            ),
        ),
        migrations.RunPython(create_marker, migrations.RunPython.noop),
    ]
