"""The mailbox's tables come with the first mail, not with a usage count (issue 16)."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.mailbox.actor import Mailbox
from apps.mailbox.services import reads
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import has_actor_state
from tests.mailbox.conftest import address, deliver_cli, simple_mail

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_schemas() -> None:
    # The cast's stable ids repeat across tests while the flush empties the registry.
    from tests.schemas import drop_user_schemas

    drop_user_schemas()


def _has_mail_tables(user_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [f"{schema_name_for(user_id)}.email_messages"])
        return cursor.fetchone()[0] is not None


def test_counting_an_empty_mailbox_creates_no_tables_and_the_first_mail_does(owner, outsider):
    assert reads.stored_message_count(owner.stable_user_id) == 0
    assert reads.count(owner) == reads.NO_MAIL
    assert not _has_mail_tables(owner.stable_user_id)
    deliver_cli(simple_mail(), address(owner), "lazy-1")
    assert _has_mail_tables(owner.stable_user_id)
    assert has_actor_state(owner.stable_user_id, Mailbox.name)
    assert reads.stored_message_count(owner.stable_user_id) == 1
    assert reads.count(owner)["messages"] == 1
    # The outsider counts nothing, and still has no mailbox tables.
    assert reads.stored_message_count(outsider.stable_user_id) == 0
    assert not _has_mail_tables(outsider.stable_user_id)


def test_every_read_of_a_mailbox_that_never_got_mail_creates_nothing(owner, outsider):
    from apps.mailbox.errors import MessageNotFound

    empty = {"messages": [], "nextCursor": None}
    assert reads.list_messages(owner, limit=10) == empty
    assert reads.search(owner, "hello") == empty
    assert reads.delivery_events(owner) == {"events": [], "nextCursor": None}
    for read in (
        lambda: reads.get_message(owner, "m-1"),
        lambda: reads.delivery_events(owner, message_id="m-1"),
        lambda: reads.classify(owner, "m-1", "spam", None),
        lambda: reads.delete_message(owner, "m-1"),
        lambda: reads.attachment(owner, "m-1", "a-1"),
    ):
        with pytest.raises(MessageNotFound):
            read()
    assert not _has_mail_tables(owner.stable_user_id)

    # Once mail arrives the same reads go to the Mailbox and see it; the outsider still has
    # neither tables nor the owner's mail.
    deliver_cli(simple_mail(subject="hello there"), address(owner), "lazy-2")
    [found] = reads.search(owner, "hello")["messages"]
    assert reads.get_message(owner, found["id"])["subject"] == "hello there"
    assert reads.list_messages(outsider, limit=10) == empty
    with pytest.raises(MessageNotFound):
        reads.get_message(outsider, found["id"])
    assert not _has_mail_tables(outsider.stable_user_id)
