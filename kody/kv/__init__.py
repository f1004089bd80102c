"""Durable key-value snapshots (the original's BUNDLE_ARTIFACTS_KV). Derived caches with a TTL
belong in the Django cache instead."""
