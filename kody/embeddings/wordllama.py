"""The default embedder: WordLlama's 256-dimension model, loaded from its own wheel.

The weights and tokenizer ship inside the ``wordllama`` package. Its default lookup searches a
user cache directory first and then the network, which misses the bundled tokenizer, so the
model is loaded with ``cache_dir`` set to the package folder and downloads disabled: a missing
file is an error at start-up, never a request to the internet.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DIMENSIONS = 256


class WordLlamaEmbedder:
    model = "wordllama-l2-supercat"
    dimensions = DIMENSIONS
    version = "0.4.0.post1"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                import wordllama  # heavy (numpy, tokenizers): only load when first used

                self._model = wordllama.WordLlama.load(
                    cache_dir=Path(wordllama.__file__).parent,
                    dim=DIMENSIONS,
                    disable_download=True,
                )
            return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        # An empty text has no tokens and would normalize to NaN; embed a visible stand-in.
        vectors = self._loaded().embed([t if t.strip() else "(empty)" for t in texts], norm=True)
        return [[float(x) for x in row] for row in vectors]
