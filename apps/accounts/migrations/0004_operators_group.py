"""The ``operators`` group (apps/accounts/operators.py): view everything, change moderation and
support models. Permissions are created here first: on a fresh database they would otherwise
only appear after the whole migrate run."""

from django.contrib.auth.management import create_permissions
from django.db import migrations


def forwards(apps, schema_editor):
    from apps.accounts.operators import sync_group

    for config in apps.get_app_configs():
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    sync_group(apps)


def backwards(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="operators").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_account_deletions"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("community", "0001_initial"),
        ("entitlements", "0002_storage_reconcile_cursor_row"),
        ("jobs", "0001_initial"),
        ("mailbox", "0002_database_foreign_keys_and_marker"),
        ("packages", "0003_secret_entry_key_id"),
        ("system_email", "0002_database_foreign_keys_and_marker"),
        ("kody", "0005_vectors_follow_the_embedder"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
