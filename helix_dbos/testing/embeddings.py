"""A local, deterministic embedding function for tests: no model, no network, same vector every time."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


def deterministic_embedding(texts: Sequence[str], dimensions: int = 64) -> list[list[float]]:
    """Hash each lower-cased word into one of ``dimensions`` buckets; L2-normalised.

    Texts sharing words get a positive cosine similarity and texts sharing none get (nearly) zero,
    which is all a test of vector search needs. Stable across processes and Python versions
    (``blake2b``, not ``hash()``).
    """
    vectors: list[list[float]] = []
    for text in texts:
        vector = [0.0] * dimensions
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest, "big") % dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        vectors.append([x / norm for x in vector] if norm else vector)
    return vectors


__all__ = ["deterministic_embedding"]
