"""Mailbox operations that views, capabilities, commands and lanes call.

* ``inbound.deliver(raw, recipient, delivery_id)`` — the inbound pipeline (see its note).
* ``reads`` — list, get, search, attachments, delivery events, classify, delete.
* ``outbound.send`` / ``outbound.reply`` — write to the Mailbox, submit, record the result.
* ``inboxes``, ``sender_rules`` — the shared configuration rows.
"""
