from django.apps import AppConfig


class MailboxConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.mailbox"
    label = "mailbox"
    verbose_name = "Mailbox"

    def ready(self) -> None:
        # Imported here: the counter calls the Mailbox actor, which needs the app registry.
        from apps.entitlements.services.counters import register_counter
        from apps.mailbox.actor import Mailbox
        from apps.mailbox.services.reads import stored_message_count

        # A user the Mailbox never ran for has no stored mail: counted 0 without asking.
        register_counter("stored_email_messages", stored_message_count, actor=Mailbox.name)
        # What the mailbox's rows weigh, for the nightly storage_bytes reconciliation: the same
        # measure the Mailbox reserves on write and releases on delete.
        from apps.entitlements.services.storage import register_schema_payload
        from apps.mailbox.actor.weight import PAYLOAD_SQL

        register_schema_payload(Mailbox.name, PAYLOAD_SQL)
        # The outbox relay runs tasks by name in whatever process relays (web, lane, worker).
        from apps.mailbox import tasks  # noqa: F401
