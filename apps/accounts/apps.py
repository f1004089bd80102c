from django.apps import AppConfig


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from apps.accounts.operators import on_post_migrate

        # Runs after django.contrib.auth has created the permissions of every model.
        post_migrate.connect(on_post_migrate, dispatch_uid="accounts.operators")
