"""Account deletion as a durable, resumable job (seed 000 "Account deletion inventory").

``start(user, requested_by)`` records an ``AccountDeletion`` row; ``run(deletion)`` executes
its steps in order, recording counts and warnings per step, and can be called again after any
failure or crash — every step is idempotent:

1. ``mark``        stamp ``users.deleting_at``, revoke every OAuth grant (apps.accounts.oauth),
                   the UserMeter tombstone (a missing meter
                   fails closed: the deletion stops and the account is kept) and the kernel's
                   registry tombstone (from then on the kernel runs only deletion-safe actor
                   methods, and never creates the user's schema again);
2. ``drain``       wait (bounded) for write leases to drain, then pass a barrier call through
                   the user's actor shard so every call queued before the mark has run;
3. ``billing``     settle Stripe (refund then cancel; ``stripe_settlement``);
4. ``out_of_band`` blobs by reference (each actor's ``blob_references``), then the
                   prefixes actors list (``blob_prefixes``: repo session workspaces), then
                   by owner prefix; KV families; vectors; each actor's ``purge``; the user schema
                   (``apps.accounts.deletion.out_of_band``);
5. ``database``    one transaction deleting or clearing every declared public row, users last;
6. ``finish``      clear the kernel's tombstone (the same email may sign up again) and
                   forget the subject id on the job row.

A failure in steps 1–4 leaves the marker, the rows and the actor state: the job is
``retained`` with the reason, and a rerun (``manage.py purge_account``, or the
``account_deletion_resume`` lane) continues from the failed step. When the deletion is
abandoned instead, ``release`` lifts the marker so the account works again.

One run at a time. A double-submitted form, ``purge_account`` beside the resume lane, or two
lanes on two workers could otherwise run the same steps side by side, and ``billing`` would
refund twice. ``run`` holds a session-level advisory lock, keyed by the account, on a
connection of its own for the whole run (``_run_lock``): a second run finds it taken and
raises ``DeletionInProgress`` without touching anything; a run that gets it re-reads the row,
so it never repeats a step another run finished while it waited. A worker that dies drops its
connection, and Postgres releases the lock with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.utils import timezone

from apps.accounts.deletion import out_of_band
from apps.accounts.deletion.report import StepReport
from apps.accounts.models import AccountDeletion, DeletionStatus, User
from apps.accounts.ownership import Owner, owned_rows, quote
from apps.accounts.surface_kinds import DELETED_USER, Match, TableTarget
from apps.accounts.surfaces import USER_TABLE_TARGETS
from kody.errors import KodyError

log = logging.getLogger(__name__)

STEPS = ("mark", "drain", "billing", "out_of_band", "database", "finish")
MAX_BACKOFF = timedelta(hours=6)
RUN_LEASE = timedelta(minutes=15)


class DeletionRetained(KodyError):
    code = "account_retained"
    status = 409
    message = "The account was kept; the deletion can be retried."


class DeletionInProgress(DeletionRetained):
    code = "account_deletion_running"
    message = "This account's deletion is already running; it carries on there."


class WriteLeasesHeld(DeletionRetained):
    code = "write_leases_held"
    message = "A write is still in flight on this account; the deletion stopped before it."


# --- entry points ---------------------------------------------------------------------------


def start(user: User, *, requested_by: str) -> AccountDeletion:
    """The open deletion of ``user`` (an existing one is resumed, never duplicated)."""
    with transaction.atomic():
        existing = (
            AccountDeletion.objects.select_for_update()
            .filter(
                subject_user_id=user.stable_user_id,
                status__in=[DeletionStatus.RUNNING, DeletionStatus.RETAINED],
            )
            .first()
        )
        if existing is not None:
            return existing
        return AccountDeletion.objects.create(
            subject_user_id=user.stable_user_id,
            subject_db_id=user.pk,
            requested_by=requested_by,
        )


def run(
    deletion: AccountDeletion, *, on_step: Callable[[StepReport], None] | None = None
) -> AccountDeletion:
    """Run the remaining steps; returns the row, ``complete`` or ``retained`` with a reason.
    Raises ``DeletionInProgress`` when another run of the same account holds the lock."""
    subject = deletion.subject_user_id or f"deletion:{deletion.pk}"
    with _run_lock(subject) as held:
        if not held:
            raise DeletionInProgress(details={"deletionId": deletion.pk})
        try:
            # Another run may have finished steps (or the whole deletion) while this caller
            # held a stale copy of the row: continue from what the database says.
            deletion.refresh_from_db()
        except AccountDeletion.DoesNotExist:
            raise DeletionRetained("This deletion was released meanwhile.") from None
        if deletion.status == DeletionStatus.COMPLETE:
            return deletion
        return _run_steps(deletion, on_step)


@contextmanager
def _run_lock(subject: str) -> Iterator[bool]:
    """``pg_try_advisory_lock`` on a connection of its own, held until the run returns.

    Its own session, so nothing the steps do to the thread's connection (commit, rollback,
    close after an error) can drop it; unlocked explicitly before closing, so a pooled
    connection does not go back to the pool still holding it."""
    conn = connections.create_connection(DEFAULT_DB_ALIAS)
    key = f"kody:account-deletion:{subject}"
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [key])
            held = bool(cursor.fetchone()[0])
        try:
            yield held
        finally:
            if held:
                with conn.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [key])
    finally:
        conn.close()


def _run_steps(
    deletion: AccountDeletion, on_step: Callable[[StepReport], None] | None
) -> AccountDeletion:
    deletion.attempts += 1
    deletion.status = DeletionStatus.RUNNING
    # A run lease: the resume lane leaves a running deletion alone until it passes, and takes
    # over one whose worker died mid-step.
    deletion.next_attempt_at = timezone.now() + RUN_LEASE
    deletion.save(update_fields=["attempts", "status", "next_attempt_at", "updated_at"])
    done = {entry["step"] for entry in deletion.steps if entry.get("ok")}
    owner = Owner(stable_id=deletion.subject_user_id or "", db_id=deletion.subject_db_id or 0)
    for name in STEPS:
        if name in done:
            continue
        deletion.step = name
        report = StepReport(name)
        try:
            STEP_FUNCTIONS[name](deletion, owner, report)
        except Exception as exc:  # noqa: BLE001 - every failure keeps the account for retry
            _retain(deletion, name, exc, report)
            if on_step:
                on_step(report)
            return deletion
        _record(deletion, report, ok=True)
        if on_step:
            on_step(report)
    deletion.status = DeletionStatus.COMPLETE
    deletion.completed_at = timezone.now()
    deletion.subject_user_id = None
    deletion.next_attempt_at = None
    deletion.last_error = ""
    deletion.save()
    return deletion


def release(deletion: AccountDeletion) -> None:
    """Abandon a retained deletion: lift the marker so the account is usable again."""
    from apps.entitlements.services import metering

    if deletion.status == DeletionStatus.COMPLETE or not deletion.subject_user_id:
        raise DeletionRetained("A completed deletion cannot be released.")
    if "database" in {entry["step"] for entry in deletion.steps if entry.get("ok")}:
        raise DeletionRetained("The account's rows are already gone.")
    from kody.userschema.schemas import unmark_deleting

    User.objects.filter(stable_user_id=deletion.subject_user_id).update(deleting_at=None)
    metering.unmark_deleting(deletion.subject_user_id)
    unmark_deleting(deletion.subject_user_id)
    deletion.delete()


# --- the steps --------------------------------------------------------------------------------


def _mark(deletion: AccountDeletion, owner: Owner, report: StepReport) -> None:
    from apps.entitlements.services import metering
    from kody.userschema.schemas import lookup, mark_deleting

    now = timezone.now()
    if "actor_state" not in deletion.result:
        # An account that never made an actor call (e.g. an unverified signup) has no schema,
        # so no meter, no leases and no actor rows: nothing to fence or purge there.
        deletion.result = {**deletion.result, "actor_state": lookup(owner.stable_id) is not None}
    marked = User.objects.filter(pk=owner.db_id, deleting_at__isnull=True).update(deleting_at=now)
    # Every OAuth grant first: a token in flight is refused from this commit on, and no
    # refresh can mint another (idempotent on a rerun).
    from apps.accounts.oauth import grants

    report.updated["oauth_grants_revoked"] = grants.revoke_all_for(owner.db_id)
    if deletion.result["actor_state"]:
        answer = metering.mark_deleting(owner.stable_id, at=now.isoformat())
        report.info["active_write_leases"] = answer.get("active_write_leases", 0)
    mark_deleting(owner.stable_id)  # waits out a running actor call of this user
    report.updated["users.deleting_at"] = marked


def _drain(deletion: AccountDeletion, owner: Owner, report: StepReport) -> None:
    from apps.entitlements.services import metering

    if not deletion.result.get("actor_state", True):
        report.info["drained"] = "no actor state"
        return
    bound = float(getattr(settings, "KODY_DELETION_DRAIN_SECONDS", 10))
    deadline = time.monotonic() + bound
    while True:
        leases = metering.list_write_leases(owner.stable_id)
        if not leases:
            break
        if time.monotonic() >= deadline:
            holders = sorted({lease["holder"] for lease in leases})
            raise WriteLeasesHeld(
                f"{len(leases)} write lease(s) still held after {bound:g}s by "
                + ", ".join(holders)[:120],
                details={"holders": holders},
            )
        time.sleep(0.2)
    # A barrier through the user's shard: when it answers, everything queued before the mark
    # has run (per-user order), and everything after it is refused by the fence.
    metering.read_deletion_state(owner.stable_id)
    report.info["drained"] = True


def _billing(deletion: AccountDeletion, owner: Owner, report: StepReport) -> None:
    from apps.accounts.deletion.stripe_settlement import settle_customer
    from apps.accounts.services import audit
    from apps.entitlements.services import billing

    user = User.objects.filter(pk=owner.db_id).first()
    if user is None or not user.stripe_customer_id or not billing.billing_enabled():
        report.info["stripe"] = "no customer" if user else "no account row"
        return

    def record(action: str, result: str, reason: str) -> None:
        audit.record(
            category="account", action=action, result=result, email=user.email, reason=reason
        )

    # The refund is computed as of the first billing attempt, and that time is kept: a retry
    # then sends Stripe the same parameters under the same idempotency keys, so a credit note
    # whose answer was lost is replayed, not issued again nor refused as a changed request.
    settled_at = int(deletion.result.get("billingAt") or datetime.now(UTC).timestamp())
    if "billingAt" not in deletion.result:
        deletion.result = {**deletion.result, "billingAt": settled_at}
        deletion.save(update_fields=["result", "updated_at"])
    settlement = settle_customer(
        billing.client(), user.stripe_customer_id, now=settled_at, audit=record
    )
    result = settlement.as_dict()
    deletion.result = {**deletion.result, **result}
    report.info.update(result)
    report.updated["stripe_subscriptions_cancelled"] = len(settlement.cancelled)
    report.warnings += [f"refund skipped: {item['reason']}" for item in settlement.skipped]


def _database(deletion: AccountDeletion, owner: Owner, report: StepReport) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        for target in USER_TABLE_TARGETS:
            _apply(cursor, target, owner, report)


def _apply(cursor: Any, target: TableTarget, owner: Owner, report: StepReport) -> None:
    where, params = owned_rows(target, owner)
    table = quote(target.table)
    if target.match == Match.REPLACE_USER_COLUMN:
        for column in target.columns:
            cursor.execute(
                f"UPDATE {table} SET {quote(column)} = %s WHERE {quote(column)} = %s",
                [DELETED_USER, owner.stable_id],
            )
            _count(report.updated, f"{target.table}.{column}", cursor.rowcount)
        for column in target.json_columns:
            # The stable id (64 hex characters: never part of another word) wherever it sits
            # in the document — a value, a list item, inside a longer string — and only in
            # rows that hold it; the rest of the operator's record stays as it was.
            cursor.execute(
                f"UPDATE {table} SET {quote(column)} ="
                f" replace({quote(column)}::text, %s, %s)::jsonb"
                f" WHERE strpos({quote(column)}::text, %s) > 0",
                [owner.stable_id, DELETED_USER, owner.stable_id],
            )
            _count(report.updated, f"{target.table}.{column}", cursor.rowcount)
        return
    if target.match == Match.NULL_USER_COLUMN:
        extra = ""
        if target.table == "platform_feedback":
            extra = ", reviewed_at = NULL, admin_note = NULL"
        for column in target.columns:
            cursor.execute(
                f"UPDATE {table} SET {quote(column)} = NULL{extra} WHERE {quote(column)} = %s",
                [owner.stable_id],
            )
            _count(report.updated, f"{target.table}.{column}", cursor.rowcount)
        return
    cursor.execute(f"DELETE FROM {table} WHERE {where}", params)
    _count(report.deleted, target.table, cursor.rowcount)


def _finish(deletion: AccountDeletion, owner: Owner, report: StepReport) -> None:
    from kody.userschema.schemas import finish_deletion

    # The schema is gone since out_of_band, and the tombstone kept anything from recreating
    # it; drop whatever is left (idempotent) and clear the tombstone, so the same email can
    # sign up again.
    finish_deletion(owner.stable_id)
    report.info["forgotten"] = True


STEP_FUNCTIONS: dict[str, Callable[[AccountDeletion, Owner, StepReport], None]] = {
    "mark": _mark,
    "drain": _drain,
    "billing": _billing,
    "out_of_band": out_of_band.step,
    "database": _database,
    "finish": _finish,
}


# --- bookkeeping ------------------------------------------------------------------------------


def _count(bucket: dict[str, int], key: str, value: int) -> None:
    bucket[key] = bucket.get(key, 0) + max(int(value), 0)


def _record(deletion: AccountDeletion, report: StepReport, *, ok: bool, error: str = "") -> None:
    entry = {**report.as_dict(), "ok": ok, "at": timezone.now().isoformat()}
    if error:
        entry["error"] = error
    deletion.steps = [*deletion.steps, entry]
    deletion.updated_at = timezone.now()
    deletion.save(update_fields=["steps", "step", "result", "updated_at"])


def _retain(deletion: AccountDeletion, step: str, exc: Exception, report: StepReport) -> None:
    reason = _reason(exc)
    log.warning("account deletion %s retained at %s: %s", deletion.pk, step, reason)
    _record(deletion, report, ok=False, error=reason)
    backoff = min(timedelta(minutes=5) * (2 ** min(deletion.attempts, 10)), MAX_BACKOFF)
    deletion.status = DeletionStatus.RETAINED
    deletion.last_error = reason
    deletion.next_attempt_at = timezone.now() + backoff
    deletion.save(update_fields=["status", "last_error", "next_attempt_at", "updated_at"])


def _reason(exc: Exception) -> str:
    """A redacted, bounded reason: the error's code and message, never raw row data."""
    if isinstance(exc, KodyError):
        text = f"{exc.code}: {exc.message}"
    else:
        text = type(exc).__name__
    return text[:200]
