"""Coded errors of the mailbox (rendered the same on REST, MCP, the account UI and commands)."""

from __future__ import annotations

from kody.errors import BadRequest, Conflict, Forbidden, KodyError, NotFound


class MessageNotFound(NotFound):
    code = "message_not_found"
    message = "No such message in your mailbox."


class AttachmentNotFound(NotFound):
    code = "attachment_not_found"
    message = "No such attachment on that message."


class AttachmentUnavailable(Conflict):
    code = "attachment_unavailable"
    message = "This attachment was larger than your plan keeps and was not stored."


class InvalidBlobKey(BadRequest):
    code = "invalid_blob_key"
    message = "That blob key does not belong to this mailbox."


class StorageLeaseLost(Conflict):
    code = "storage_lease_lost"
    message = "Another attempt now holds this delivery; this one must stop."


class DeliveryNotClaimed(Conflict):
    code = "delivery_not_claimed"
    message = "The delivery is not in a state that allows this step."


class BlobUnavailable(KodyError):
    code = "blob_unavailable"
    status = 503
    message = "Mail storage is unavailable; try again."


class SubmissionInProgress(Conflict):
    code = "submission_in_progress"
    message = "Another attempt is submitting this message; its result will be recorded."


class SenderNotVerified(Forbidden):
    code = "sender_not_verified"
    message = "That sender address is not one of your verified sender identities."


class InvalidCursor(BadRequest):
    code = "invalid_cursor"
    message = "The cursor is not one this list issued."


class MailboxWritesClosed(KodyError):
    code = "mailbox_writes_closed"
    status = 503
    message = "Email writes are closed: the email graph authority marker is missing."


class OutboundPaused(Forbidden):
    code = "email_outbound_paused"
    message = "Sending mail is paused for this account; nothing was sent."
