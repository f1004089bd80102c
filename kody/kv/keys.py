"""Key builders in the original's formats. Every segment but the last must be free of ``:``
so one key can never be read as another (or as another user's)."""

from __future__ import annotations


class BadKeySegment(ValueError):
    pass


def _key(scheme: str, *segments: str) -> str:
    *inner, last = segments
    for segment in inner:
        if not segment or ":" in segment:
            raise BadKeySegment(f"{scheme}: bad key segment {segment!r}")
    if not last:
        raise BadKeySegment(f"{scheme}: empty final key segment")
    return ":".join((scheme, "v1", *segments))


def source_snapshot(source_id: str, published_commit: str) -> str:
    return _key("source-snapshot", source_id, published_commit)


def source_manifest_snapshot(source_id: str, published_commit: str) -> str:
    return _key("source-manifest-snapshot", source_id, published_commit)


def bundle_artifact(
    source_id: str, commit: str, kind: str, artifact_name: str | None, entry_point: str
) -> str:
    return _key("bundle-artifact", source_id, commit, kind, artifact_name or "_", entry_point)


def community_snapshot(listing_id: str) -> str:
    return _key("community-snapshot", listing_id)


def package_retriever_manifest(user_id: str, package_id: str, revision: str | int) -> str:
    return _key("package-retriever-manifest", user_id, package_id, str(revision))


def package_retriever_index_entry(
    user_id: str, scope: str, package_id: str, retriever_key: str
) -> str:
    return _key("package-retriever-index-entry", user_id, scope, package_id, retriever_key)


USER_SCOPED_SCHEMES = ("package-retriever-manifest", "package-retriever-index-entry")


def user_prefixes(user_id: str) -> list[str]:
    if not user_id or ":" in user_id:
        raise BadKeySegment(f"bad user id {user_id!r}")
    return [f"{scheme}:v1:{user_id}:" for scheme in USER_SCOPED_SCHEMES]


def owner_of(key: str) -> str | None:
    """The user a user-scoped key belongs to, or None for keys that are not per user."""
    parts = key.split(":", 3)
    if len(parts) == 4 and parts[0] in USER_SCOPED_SCHEMES and parts[1] == "v1":
        return parts[2]
    return None
