"""Account deletion: inventory-driven, fail-closed, resumable (see README.md beside this file)."""
