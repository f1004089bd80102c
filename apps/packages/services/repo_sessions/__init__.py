"""Repo sessions (seed 003): an agent's editing workspace over a repo or package source."""
