from django.apps import AppConfig


class SystemEmailConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.system_email"
    label = "system_email"
    verbose_name = "System email"

    def ready(self) -> None:
        from apps.mailbox import system_mail
        from apps.system_email.services import inbound, status

        # Mail to the reserved system locals is this app's: mailbox routing hands it over.
        system_mail.register(system_mail.SystemMail(deliver=inbound.deliver, status=status.counts))
