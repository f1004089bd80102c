from django.db import migrations, models


class Migration(migrations.Migration):
    """Whether a binding's API base URL was given by the person. Bindings saved before this
    keep their URL on refresh (marked explicit), as they did until now."""

    dependencies = [("packages", "0007_integration_provider_seed")]

    operations = [
        migrations.AddField(
            model_name="useropenapibinding",
            name="api_base_url_explicit",
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name="useropenapibinding",
            name="api_base_url_explicit",
            field=models.BooleanField(default=False),
        ),
    ]
