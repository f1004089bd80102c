"""The feature flags the product evaluates, as rows, disabled.

A flag with no row evaluates off and records no exposure, so an experiment would show nothing
in the admin readout until an operator happened to create its row with the right key. Seeding
each flag the code and templates read makes it visible in admin from the start, off for
everyone, with exposures counting the control group from the first page view. An existing row
(an operator got there first) is left as it is.
"""

from django.db import migrations

FLAGS = {
    "account_home_next_step": (
        "Account home: a card with the person's next onboarding step (connect an agent, save a "
        "package, add a second agent), the in-app counterpart of the tips mail. Evaluated in "
        "code (apps/accounts/home.py)."
    ),
    "account_experiments_hint": (
        "Account home: a line inviting people who have not opted into experiments to try "
        "them. Evaluated in the template (accounts/home.html)."
    ),
}


def seed_flags(apps, schema_editor):
    FeatureFlag = apps.get_model("accounts", "FeatureFlag")
    for key, note in FLAGS.items():
        FeatureFlag.objects.get_or_create(key=key, defaults={"enabled": False, "note": note})


class Migration(migrations.Migration):
    dependencies = [("accounts", "0008_hash_recovery_codes")]

    # Going back leaves the rows: they may carry an operator's rollout by then.
    operations = [migrations.RunPython(seed_flags, migrations.RunPython.noop)]
