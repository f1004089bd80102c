"""Listing icons: the package's own icon fitted to 256 px WebP, or a generated one.

Bytes live in the ``community_assets`` bucket under ``community-icon:v3/{listingId}/{commit}/
asset``; a descriptor per (listing, commit) in KV points at them, so the public route never
serves an icon of another commit. Only the pinned commit's object and descriptor survive a
publish: every other one under the listing's prefixes is pruned.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

from django.core.files.base import ContentFile

from kody.blobs import community_icon_key
from kody.blobs.buckets import bucket, delete_keys, list_prefix
from kody.kv import store as kv

BUCKET = "community_assets"
SIZE = 256
MAX_SOURCE_BYTES = 4 * 1024 * 1024
# Pillow refuses images beyond this many pixels before decoding them (decompression bombs).
MAX_PIXELS = 4096 * 4096
CONTENT_TYPE = "image/webp"
# Seed order of the taught icon source and its aliases. SVG is taught too, but there is no
# rasterizer here, so an SVG-only package gets the generated icon.
SOURCES = (
    ".kody/icon.png",
    ".kody/icon.webp",
    ".kody/icon.jpg",
    ".kody/icon.jpeg",
    "icon.png",
    "icon.webp",
    "icon.jpg",
    "icon.jpeg",
    "community-icon.png",
    "community-icon.webp",
    "community-icon.jpg",
    "community-icon.jpeg",
    "icons/icon-192.png",
)
OBJECT_PREFIXES = ("community-icon:v1/", "community-icon:v2/", "community-icon:v3/")
PALETTE = ("#2f6f4f", "#3a5a8c", "#8c3a5a", "#7a5c1e", "#4f3a8c", "#1e6a7a", "#8c4a2f")


def descriptor_key(listing_id: str, commit: str) -> str:
    return f"{descriptor_prefix(listing_id)}{commit}"


def descriptor_prefix(listing_id: str) -> str:
    return f"derived-cache:v1:community-icon:v3:{listing_id}:"


def fit(data: bytes) -> bytes | None:
    """The image scaled down to fit 256x256 as WebP, or None when it is not a usable image."""
    from PIL import Image

    if len(data) > MAX_SOURCE_BYTES:
        return None
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format not in ("PNG", "JPEG", "WEBP"):
                return None
            image.load()
            frame = image.convert("RGBA")
    except (OSError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        return None
    frame.thumbnail((SIZE, SIZE))
    out = io.BytesIO()
    frame.save(out, "WEBP", quality=85)
    return out.getvalue()


def generated(seed: str, label: str) -> bytes:
    """A plain tile with the listing's initial, coloured by a hash of its id."""
    from PIL import Image, ImageDraw, ImageFont

    colour = PALETTE[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(PALETTE)]
    image = Image.new("RGB", (SIZE, SIZE), colour)
    letter = (label.strip("@/ ") or "k")[0].upper()
    draw = ImageDraw.Draw(image)
    try:
        font: Any = ImageFont.load_default(size=150)
    except (OSError, TypeError):
        font = ImageFont.load_default()
    draw.text((SIZE / 2, SIZE / 2), letter, fill="#ffffff", font=font, anchor="mm")
    out = io.BytesIO()
    image.save(out, "WEBP", quality=85)
    return out.getvalue()


def render(files: dict[str, bytes], seed: str, label: str) -> tuple[bytes, str]:
    """(WebP bytes, where they came from): the first usable taught source, else generated."""
    for path in SOURCES:
        data = files.get(path)
        if data is not None:
            fitted = fit(data)
            if fitted is not None:
                return fitted, path
    return generated(seed, label), "generated"


def store(listing_id: str, commit: str, data: bytes, origin: str) -> str:
    key = community_icon_key(listing_id, commit)
    storage = bucket(BUCKET)
    if storage.exists(key):
        storage.delete(key)
    storage.save(key, ContentFile(data))
    kv.put_json(
        descriptor_key(listing_id, commit),
        {"key": key, "contentType": CONTENT_TYPE, "bytes": len(data), "origin": origin},
    )
    return key


def prune(listing_id: str, keep_commit: str | None) -> int:
    """Delete every icon object and descriptor of the listing except ``keep_commit``'s."""
    keep = community_icon_key(listing_id, keep_commit) if keep_commit else None
    doomed = [
        key
        for prefix in OBJECT_PREFIXES
        for key in list_prefix(BUCKET, f"{prefix}{listing_id}/")
        if key != keep
    ]
    delete_keys(BUCKET, doomed)
    from kody.kv.models import KvEntry

    descriptors = KvEntry.objects.filter(key__startswith=descriptor_prefix(listing_id))
    if keep_commit:
        descriptors = descriptors.exclude(key=descriptor_key(listing_id, keep_commit))
    gone, _ = descriptors.delete()
    return len(doomed) + gone


def read(listing_id: str, commit: str) -> tuple[bytes, str] | None:
    descriptor = kv.get_json(descriptor_key(listing_id, commit))
    if not descriptor:
        return None
    storage = bucket(BUCKET)
    try:
        with storage.open(descriptor["key"], "rb") as handle:
            return handle.read(), descriptor["contentType"]
    except FileNotFoundError:
        return None
