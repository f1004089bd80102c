"""Database-level ON DELETE actions, and the permanent graph-authority marker row.

The original's baseline created the dedicated graph with these foreign keys and seeded the
marker (authority 'dedicated', zero mismatches, zero provider links); system-mail write paths
check it, so it exists from the first migrate.
"""

from django.db import migrations
from django.utils import timezone

FOREIGN_KEYS = [
    # (table, constraint, column, referenced table, on delete)
    ("system_email_threads", "system_email_threads_inbox_fk", "inbox_id", "email_inboxes",
     "SET NULL"),
    ("system_email_messages", "system_email_msgs_inbox_fk", "inbox_id", "email_inboxes",
     "SET NULL"),
    ("system_email_messages", "system_email_msgs_thread_fk", "thread_id", "system_email_threads",
     "SET NULL"),
    ("system_email_messages", "system_email_msgs_sender_fk", "sender_identity_id",
     "email_sender_identities", "SET NULL"),
    ("system_email_attachments", "system_email_att_message_fk", "message_id",
     "system_email_messages", "CASCADE"),
    ("system_email_delivery_events", "system_email_events_message_fk", "message_id",
     "system_email_messages", "SET NULL"),
    ("system_email_delivery_events", "system_email_events_inbox_fk", "inbox_id", "email_inboxes",
     "SET NULL"),
]


def _add(table: str, name: str, col: str, ref: str, action: str) -> str:
    return (
        f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({col}) "
        f"REFERENCES {ref} (id) ON DELETE {action}"
    )


def create_marker(apps, schema_editor) -> None:
    marker = apps.get_model("system_email", "SystemEmailGraphAuthority")
    marker.objects.using(schema_editor.connection.alias).get_or_create(
        singleton=1, defaults={"authority": "dedicated", "cutover_at": timezone.now()}
    )


class Migration(migrations.Migration):
    dependencies = [
        ("system_email", "0001_initial"),
        ("mailbox", "0001_initial"),
    ]

    operations = [
        *(
            migrations.RunSQL(
                sql=_add(*fk), reverse_sql=f"ALTER TABLE {fk[0]} DROP CONSTRAINT {fk[1]}"
            )
            for fk in FOREIGN_KEYS
        ),
        migrations.RunPython(create_marker, migrations.RunPython.noop),
    ]
