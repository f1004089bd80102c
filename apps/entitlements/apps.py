from django.apps import AppConfig


class EntitlementsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.entitlements"
    label = "entitlements"
    verbose_name = "Entitlements"

    def ready(self) -> None:
        from apps.entitlements import signals

        signals.connect()
