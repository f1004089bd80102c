from __future__ import annotations

import re

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$")
_EXTENSION = re.compile(r"^[a-z0-9]{1,8}$")


class InvalidBlobKey(ValueError):
    pass


def _segment(value: str, what: str) -> str:
    """One path segment: no slashes, no dot-dot, nothing that could climb out of a prefix."""
    if not _SEGMENT.match(value) or ".." in value:
        raise InvalidBlobKey(f"invalid {what} for a blob key: {value!r}")
    return value


def email_raw_prefix(user_id: str) -> str:
    return f"email-raw:v1:{_segment(user_id, 'user id')}/"


def email_raw_key(user_id: str, message_id: str) -> str:
    return email_raw_prefix(user_id) + _segment(message_id, "message id")


def email_attachment_prefix(user_id: str) -> str:
    return f"email-attachment:v1:{_segment(user_id, 'user id')}/"


def email_attachment_key(user_id: str, message_id: str, attachment_id: str) -> str:
    return (
        email_attachment_prefix(user_id)
        + f"{_segment(message_id, 'message id')}/{_segment(attachment_id, 'attachment id')}"
    )


def user_avatar_prefix(stable_user_id: str) -> str:
    """Relative to the ``user_avatars`` storage (``user-avatars/`` inside community assets)."""
    return f"{_segment(stable_user_id, 'user id')}/"


def user_avatar_key(stable_user_id: str, content_hash: str, extension: str) -> str:
    if not _EXTENSION.match(extension):
        raise InvalidBlobKey(f"invalid avatar extension: {extension!r}")
    return user_avatar_prefix(stable_user_id) + f"{_segment(content_hash, 'hash')}.{extension}"


def community_icon_key(listing_id: str, commit: str) -> str:
    return (
        f"community-icon:v3/{_segment(listing_id, 'listing id')}/{_segment(commit, 'commit')}/asset"
    )


def identity_icon_key(repo_id: str, commit: str) -> str:
    return f"identity-icon:v1/{_segment(repo_id, 'repo id')}/{_segment(commit, 'commit')}/asset"


def repo_session_prefix(session_id: str) -> str:
    return f"repo-session:{_segment(session_id, 'session id')}/"


def source_repo_prefix(repo_id: str) -> str:
    """Everything of one git repo in the ``source_repos`` storage (packs under ``pack/``)."""
    return f"{_segment(repo_id, 'repo id')}/"
