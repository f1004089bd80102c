"""``kody_lanes.paused_by`` held the pausing operator's username, which outlived the
operator's account deletion. It becomes ``paused_by_user_id`` (their stable id), which the
deletion job nulls like every other "done by" column (apps/accounts/surfaces.py).

Rows paused today are mapped through the user model; a name no user has any more is dropped.
"""

from django.conf import settings
from django.db import migrations, models


def forwards(apps, schema_editor):
    LaneControl = apps.get_model("kody", "LaneControl")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    for row in LaneControl.objects.exclude(paused_by=""):
        found = User.objects.filter(**{User.USERNAME_FIELD: row.paused_by}).first()
        row.paused_by_user_id = getattr(found, "stable_user_id", None)
        row.save(update_fields=["paused_by_user_id"])


def backwards(apps, schema_editor):
    LaneControl = apps.get_model("kody", "LaneControl")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    for row in LaneControl.objects.exclude(paused_by_user_id=None):
        found = User.objects.filter(stable_user_id=row.paused_by_user_id).first()
        row.paused_by = getattr(found, User.USERNAME_FIELD, "") if found else ""
        row.save(update_fields=["paused_by"])


class Migration(migrations.Migration):
    dependencies = [
        ("kody", "0012_schema_hibernation"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="lanecontrol",
            name="paused_by_user_id",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="lanecontrol", name="paused_by"),
    ]
