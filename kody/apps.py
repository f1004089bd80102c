from django.apps import AppConfig


class KodyConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "kody"
    label = "kody"
    verbose_name = "Kody platform kernel"

    def ready(self) -> None:
        from kody.discovery import autodiscover

        autodiscover()

        import kody.vectors.checks  # noqa: F401  (registers the embedder/column check)
