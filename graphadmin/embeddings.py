"""Embedders: text -> unit vector of EMBEDDING_DIM floats. The one in use is named by settings.EMBEDDER.

The default, HashingEmbedder, needs no model download and is deterministic: it hashes word
unigrams, word bigrams and character 4-grams (signed feature hashing, blake2b so the result does
not depend on PYTHONHASHSEED) into the vector and L2-normalises it. Texts sharing vocabulary are
close; it knows no synonyms. Production deployments plug in a sentence-embedding model instead.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import lru_cache
from typing import Protocol, Sequence

from django.conf import settings
from django.utils.module_loading import import_string

_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]*", re.IGNORECASE)
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with we our "
    "you your they their not but if then than so do does did can could should would into over under about".split()
)


class Embedder(Protocol):
    """What an embedder provides: a dimension and a batch call."""

    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class HashingEmbedder:
    """Deterministic, offline feature-hashing embedder (see the module docstring for its limits)."""

    def __init__(self, dim: int | None = None):
        self.dim = dim or settings.EMBEDDING_DIM

    def _features(self, text: str):
        words = [w.lower() for w in _WORD.findall(text)]
        content = [w for w in words if w not in _STOPWORDS]
        for w in content:
            yield "w:" + w, 1.0
            padded = f"<{w}>"
            for i in range(max(1, len(padded) - 3)):
                yield "c:" + padded[i : i + 4], 0.25
        for a, b in zip(content, content[1:]):
            yield f"b:{a} {b}", 0.5

    def embed_one(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vec[index] += sign * weight
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0.0:
            return vec
        return [v / norm for v in vec]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(t) for t in texts]


@lru_cache(maxsize=None)
def _load(path: str):
    return import_string(path)()


def get_embedder() -> Embedder:
    """The embedder named by settings.EMBEDDER (a dotted path to a class taking no arguments)."""
    embedder = _load(settings.EMBEDDER)
    if embedder.dim != settings.EMBEDDING_DIM:
        raise ValueError(f"{settings.EMBEDDER} gives {embedder.dim} dimensions; EMBEDDING_DIM is {settings.EMBEDDING_DIM}.")
    return embedder


def embed_texts(texts: Sequence[str]) -> list[list[float]]:
    """Embed a batch of texts with the configured embedder."""
    return get_embedder().embed(texts)
