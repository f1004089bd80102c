"""Embedding models compared: speed on 1,000 short texts and recall@1 on a small paraphrase set.

Candidates are the ones that run with no download: WordLlama's 256-dimension model (the
default, weights in its wheel), the same model truncated to 64 dimensions (Matryoshka), and a
feature-hashing baseline (no learned semantics) as the floor.

    .venv/bin/python benchmarks/embeddings.py
"""

from __future__ import annotations

import hashlib
import os
import re
import statistics
import time
from pathlib import Path

import numpy as np

PAIRS = [
    ("what does the user drink in the morning", "Prefers green tea at breakfast, dislikes coffee"),
    ("which editor do they code in", "Writes code in Neovim with a dark colour scheme"),
    ("upcoming travel plans", "Flying to Lisbon in May for a conference"),
    ("name of their pet", "Has a beagle called Biscuit"),
    ("dietary restrictions", "Vegetarian, allergic to peanuts"),
    ("preferred programming language", "Mostly writes Python, some Rust"),
    ("how to reach them urgently", "Call the mobile phone number, not email"),
    ("what time zone are they in", "Lives in Berlin, Central European Time"),
    ("favourite music", "Listens to jazz and old soul records"),
    ("send an email from my inbox", "emailSend: send a message from the user's own address"),
    ("remember a fact about me", "memoryUpsert: save a durable long-term memory"),
    ("store an api key safely", "secretSet: save an encrypted secret for packages"),
    ("schedule something every day", "jobSchedule: run a package job on a cron schedule"),
    ("how much of my plan have I used", "accountUsage: usage against plan limits"),
    ("delete a saved configuration value", "valueDelete: remove one named value"),
    ("which meetings are on monday", "Weekly team sync every Monday at 10:00"),
    ("kids' names", "Two children, Ana and Tomás"),
    ("car details", "Drives a blue 2019 electric hatchback"),
    ("where do they work", "Software engineer at a logistics startup"),
    ("exercise habits", "Runs 5 km three times a week before work"),
]


def hashing_embed(texts: list[str], dims: int = 256) -> np.ndarray:
    out = np.zeros((len(texts), dims), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            out[i, h % dims] += 1.0 if (h >> 63) else -1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def wordllama_embedder(trunc: int | None):
    import wordllama

    model = wordllama.WordLlama.load(
        cache_dir=Path(wordllama.__file__).parent, disable_download=True, trunc_dim=trunc
    )
    return lambda texts: model.embed(texts, norm=True)


def recall_at_1(embed) -> float:
    queries = embed([q for q, _ in PAIRS])
    docs = embed([d for _, d in PAIRS])
    best = (queries @ docs.T).argmax(axis=1)
    return float((best == np.arange(len(PAIRS))).mean())


def speed_ms(embed, texts: list[str], repeats: int = 7) -> float:
    embed(texts[:10])
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        embed(texts)
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def main() -> None:
    texts = [
        f"user {i} prefers dark mode and tea number {i % 37} in the morning" for i in range(1000)
    ]
    print(f"load average {os.getloadavg()[0]:.2f}")
    candidates = {
        "wordllama 256 (default)": wordllama_embedder(None),
        "wordllama truncated to 64": wordllama_embedder(64),
        "feature hashing 256 (no semantics)": hashing_embed,
    }
    base = None
    print(f"{'model':38} {'1,000 texts ms':>15} {'vs default':>11} {'recall@1':>9}")
    for name, embed in candidates.items():
        ms = speed_ms(embed, texts)
        base = base or ms
        print(f"{name:38} {ms:15.1f} {ms / base:10.2f}x {recall_at_1(embed):9.2f}")


if __name__ == "__main__":
    main()
