from __future__ import annotations

from datetime import timedelta

import pytest

from kody.kv import keys, store
from kody.lanes import run_lane

pytestmark = pytest.mark.django_db


def test_keys_keep_the_original_formats():
    assert keys.source_snapshot("src1", "abc") == "source-snapshot:v1:src1:abc"
    assert keys.bundle_artifact("src1", "abc", "worker", None, "index.ts") == (
        "bundle-artifact:v1:src1:abc:worker:_:index.ts"
    )
    assert keys.community_snapshot("lst") == "community-snapshot:v1:lst"
    assert keys.package_retriever_manifest("u1", "p1", 3) == "package-retriever-manifest:v1:u1:p1:3"
    with pytest.raises(keys.BadKeySegment):
        keys.source_snapshot("a:b", "abc")


def test_put_get_overwrite_delete():
    key = keys.community_snapshot("lst-1")
    store.put_json(key, {"title": "one"})
    store.put_json(key, {"title": "two"})
    assert store.get_json(key) == {"title": "two"}
    assert store.delete(key) is True
    assert store.get(key) is None


def test_expired_keys_read_as_absent_and_are_purged_by_their_lane():
    store.put("tmp:v1:x", b"data", ttl=timedelta(seconds=-1))
    store.put("keep:v1:x", b"data")
    assert store.get("tmp:v1:x") is None
    run_lane("kv_expired")
    assert store.purge_expired(10) == 0
    assert store.get("keep:v1:x") == b"data"


def test_the_owner_reads_their_key_and_an_outsider_is_refused(owner_id, outsider_id):
    key = keys.package_retriever_manifest(owner_id, "pkg", 1)
    store.put(key, "manifest")
    assert store.get_owned(owner_id, key) == b"manifest"
    with pytest.raises(store.NotYourKey):
        store.get_owned(outsider_id, key)
    with pytest.raises(store.NotYourKey):
        store.delete_owned(outsider_id, key)
    with pytest.raises(store.NotYourKey):
        store.get_owned(owner_id, keys.community_snapshot("shared"))


def test_deleting_a_users_keys_leaves_everyone_elses(owner_id, outsider_id):
    mine = keys.package_retriever_index_entry(owner_id, "scope", "pkg", "k")
    theirs = keys.package_retriever_index_entry(outsider_id, "scope", "pkg", "k")
    store.put(mine, "a")
    store.put(theirs, "b")
    assert store.delete_user_keys(owner_id) == 1
    assert store.get(mine) is None and store.get(theirs) == b"b"
