"""Money moves once: two runs of one account's deletion never both settle billing.

A double-submitted delete form, ``purge_account`` typed while the resume lane works on the
same account, two workers picking up one retained deletion: each of these is two runs of one
deletion. The runs below meet at the Stripe fake, which holds the first credit-note listing
back until a second caller lists too (or two seconds pass), so a race that today's code would
lose is lost every time, not now and then.
"""

from __future__ import annotations

import io
import secrets
import threading
from collections.abc import Iterator

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from apps.accounts.deletion import job
from apps.accounts.deletion.stripe_settlement import idempotency_key
from apps.accounts.models import AccountDeletion, DeletionStatus, User
from config.buckets import bucket_storages
from tests.accounts.factories import UserFactory
from tests.concurrency import in_threads
from tests.entitlements.stripe_fake import StripeFake

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

DAY = 86_400


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


@pytest.fixture(autouse=True)
def fs_buckets(tmp_path):  # type: ignore[no-untyped-def]
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield tmp_path


@pytest.fixture
def stripe(settings) -> Iterator[StripeFake]:  # type: ignore[no-untyped-def]
    fake = StripeFake()
    settings.STRIPE_API_BASE = fake.start()
    settings.STRIPE_SECRET_KEY = "sk_test_fake"
    yield fake
    fake.stop()


@pytest.fixture
def subscriber(stripe: StripeFake, frozen_clock: object) -> User:
    """A Pro subscriber twenty days into a thirty-day period that cost 30.00: a refund of
    10.00, so two of them would fit under what the invoice took (the fake would issue both)."""
    user = UserFactory(username=f"payer-{secrets.token_hex(3)}")
    customer = stripe.add_customer(email=user.email)["id"]
    User.objects.filter(pk=user.pk).update(stripe_customer_id=customer)
    subscription = stripe.add_subscription(customer, "kody_pro_month")
    now = int(timezone.now().timestamp())
    stripe.add_invoice(
        subscription,
        [{"amount": 3000, "period": {"start": now - 20 * DAY, "end": now + 10 * DAY}}],
    )
    user.refresh_from_db()
    return user


def hold_first_listing(stripe: StripeFake, wait: float = 2.0) -> None:
    """The first caller to list credit notes waits until a second one lists too (or ``wait``
    seconds pass): two settlements then both list before either issues a note."""
    arrived = threading.Barrier(2)

    def before(method: str, path: str) -> None:
        if method == "GET" and path == "/v1/credit_notes":
            try:
                arrived.wait(timeout=wait)
            except threading.BrokenBarrierError:
                pass

    stripe.before = before


def issued_by_us(stripe: StripeFake) -> list[dict]:
    return [n for n in stripe.credit_notes if n["metadata"].get("kody_account_deletion") == "1"]


def test_two_concurrent_runs_of_one_deletion_issue_exactly_one_credit_note(stripe, subscriber):
    hold_first_listing(stripe)
    # The double submit: two requests each start (the same row) and run it.
    first = job.start(subscriber, requested_by="self")
    second = job.start(subscriber, requested_by="self")
    assert first.pk == second.pk

    results = in_threads(lambda: job.run(first), lambda: job.run(second))

    [note] = issued_by_us(stripe)
    assert note["total"] == 1000  # 3000 × 10/30 unused
    # The run that came second was refused while the first held the lock (or, had it come
    # only after the first finished, found the deletion complete and did nothing).
    finished = [r for r in results if isinstance(r, AccountDeletion)]
    refused = [r for r in results if isinstance(r, job.DeletionInProgress)]
    assert len(finished) + len(refused) == 2 and finished, results
    assert all(r.status == DeletionStatus.COMPLETE for r in finished)
    assert all(r.code == "account_deletion_running" and r.status == 409 for r in refused)
    assert not User.objects.filter(pk=subscriber.pk).exists()
    [only] = AccountDeletion.objects.all()
    assert only.status == DeletionStatus.COMPLETE and only.attempts == 1


def test_purge_account_while_a_run_is_in_progress_does_nothing_and_says_so(stripe, subscriber):
    deletion = job.start(subscriber, requested_by="self")
    inside = threading.Event()
    release = threading.Event()
    real_billing = job.STEP_FUNCTIONS["billing"]

    def slow_billing(*args):  # type: ignore[no-untyped-def]
        inside.set()
        release.wait(timeout=20)
        real_billing(*args)

    job.STEP_FUNCTIONS["billing"] = slow_billing
    try:
        background = threading.Thread(
            target=lambda: (job.run(deletion), connections.close_all()), daemon=True
        )
        background.start()
        assert inside.wait(timeout=20)
        with pytest.raises(CommandError, match="already running"):
            call_command("purge_account", subscriber.email, "--yes", stdout=io.StringIO())
        assert issued_by_us(stripe) == []  # the operator's run settled nothing
        release.set()
        background.join(timeout=30)
    finally:
        job.STEP_FUNCTIONS["billing"] = real_billing
        release.set()
    assert len(issued_by_us(stripe)) == 1
    assert AccountDeletion.objects.get().status == DeletionStatus.COMPLETE


def test_a_run_holding_a_stale_copy_continues_from_the_database_and_does_not_refund_again(
    stripe, subscriber
):
    stale = job.start(subscriber, requested_by="self")
    done = job.run(job.start(subscriber, requested_by="operator"))
    assert done.status == DeletionStatus.COMPLETE and len(issued_by_us(stripe)) == 1
    # The resume lane's copy, read before the operator's run, still says "running, no steps".
    assert stale.steps == [] and stale.status == DeletionStatus.RUNNING
    again = job.run(stale)
    assert again.status == DeletionStatus.COMPLETE
    assert again.steps == done.steps and again.attempts == done.attempts == 1  # nothing re-ran
    assert len(issued_by_us(stripe)) == 1


def test_every_stripe_mutation_of_the_settlement_carries_a_key_from_its_objects(stripe, subscriber):
    customer = subscriber.stripe_customer_id
    [subscription] = stripe.subscriptions.values()
    [invoice] = stripe.invoices.values()
    job.run(job.start(subscriber, requested_by="self"))
    keys = {path: key for (method, path, key) in stripe.idempotent}
    assert keys["/v1/credit_notes"] == idempotency_key(
        "credit-note", subscription["id"], invoice["id"]
    )
    assert keys[f"/v1/subscriptions/{subscription['id']}"] == idempotency_key(
        "cancel", subscription["id"]
    )
    assert customer  # the subscriber was billed through the fake
