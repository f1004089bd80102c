"""Per-user state of email: the Mailbox actor (SCHEMA.md §2.2)."""

from apps.accounts.actor_surfaces import ActorSurface, register_actor
from apps.mailbox.actor.mailbox import Mailbox
from apps.mailbox.actor.models import MAILBOX_SCHEMA, MAILBOX_VERSION

register_actor(
    ActorSurface(
        Mailbox.name,
        purge="purge",
        export_pages="export_pages",
        export_section="mailbox",
        import_page="import_page",
        blob_references="blob_references",
        note="threads, messages, attachments and delivery events; raw MIME and external "
        "attachments are in email_blobs under email-raw:v1:/email-attachment:v1:{userId}/",
    )
)

__all__ = ["MAILBOX_SCHEMA", "MAILBOX_VERSION", "Mailbox"]
