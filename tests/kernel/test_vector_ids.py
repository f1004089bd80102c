"""Vector ids: passthrough when they fit in 64 UTF-8 bytes, else a deterministic digest form."""

from __future__ import annotations

import hashlib

from kody.vectors.ids import MAX_ID_BYTES, parse, vector_id


def test_a_short_id_passes_through_and_parses_back():
    vid = vector_id("memory", "3f2c9a1e-0b7d-4c1a-9d55-6a7b8c9d0e1f")
    assert vid == "memory_3f2c9a1e-0b7d-4c1a-9d55-6a7b8c9d0e1f"
    assert parse("memory", vid) == "3f2c9a1e-0b7d-4c1a-9d55-6a7b8c9d0e1f"
    assert parse("job", vid) is None


def test_a_long_id_becomes_a_stable_digest_within_64_bytes():
    raw = "package-job:pkg-0123456789abcdef:nightly-report-for-the-whole-team"
    vid = vector_id("job", raw)
    assert vid.startswith("job_sha256:") and len(vid.encode()) == MAX_ID_BYTES
    assert vid == "job_sha256:" + hashlib.sha256(raw.encode()).hexdigest()[: MAX_ID_BYTES - 11]
    assert vector_id("job", raw) == vid  # upsert and delete name the same vector
    assert parse("job", vid) is None  # only the passthrough form maps back to a row id


def test_length_is_counted_in_utf8_bytes_not_characters():
    raw = "é" * 30  # 30 characters, 60 bytes: "memory_" + 60 bytes is over 64
    assert len(f"memory_{raw}") <= MAX_ID_BYTES
    assert vector_id("memory", raw).startswith("memory_sha256:")
