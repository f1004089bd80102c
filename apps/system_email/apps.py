from django.apps import AppConfig


class SystemEmailConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.system_email"
    label = "system_email"
    verbose_name = "System email"
