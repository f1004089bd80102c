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
    from tests.entitlements.conftest import drop_user_schemas

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
