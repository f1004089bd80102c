"""The storage reconciliation lane's singleton cursor starts at the beginning of the keyset."""

from django.db import migrations


def create_cursor(apps, schema_editor) -> None:
    cursor = apps.get_model("entitlements", "D1StorageReconcileCursor")
    cursor.objects.using(schema_editor.connection.alias).get_or_create(
        singleton=1, defaults={"position": ""}
    )


class Migration(migrations.Migration):
    dependencies = [("entitlements", "0001_initial")]

    operations = [migrations.RunPython(create_cursor, migrations.RunPython.noop)]
