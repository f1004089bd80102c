"""pgvector-backed vector index (the original's Vectorize), isolated per user."""
