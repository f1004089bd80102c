"""The transactional outbox: effects written in the same transaction as the change that
causes them, relayed at least once after it commits.

``transaction.on_commit`` work is lost when the process dies right after COMMIT. Instead::

    from kody import outbox

    outbox.enqueue(
        "entitlements.refresh_stripe_plan",
        {"stable_user_id": user_id},
        key=f"stripe-plan-refresh:{user_id}:{call_id}",
    )

The row commits or rolls back with the caller's transaction (an actor call's included). The
relay (``kody.outbox.relay``) runs the named Celery task's function with the payload as
keyword arguments, in the relay's own process, then deletes the row; a failure is retried
with backoff. It runs right after the commit (a best-effort kick on the ``default`` queue)
and every lane tick (``outbox_relay``), which finds whatever a lost kick or a dead relay
left. Delivery is at least once: a relay that dies after the task ran but before the delete
runs it again, so tasks must be idempotent (the payload should carry what they need to
recognise a repeat, e.g. the key). Enqueueing an existing key adds nothing.
"""

from kody.outbox.core import RelayReport, enqueue, relay

__all__ = ["RelayReport", "enqueue", "relay"]
